<?php
/**
 * Plugin Name: Action Scheduler: dedicated workers
 * Description: Leaves the Action Scheduler queue to the worker pods (wp action-scheduler run): no
 *              WP-Cron runner and no async request runner in web requests, and the
 *              concurrent-batches limit from the AS_CONCURRENT_BATCHES environment variable.
 * Version: 0.1.0
 *
 * Install as a must-use plugin: copy to wp-content/mu-plugins/ in the WordPress image that both
 * the web pods and the worker pods run. Shipped with the actionscheduler-exporter Helm chart.
 */

defined( 'ABSPATH' ) || exit;

/*
 * The limit the workers obey, and the exporter compares active claims with: both come from the
 * chart's worker.concurrentBatches value.
 */
add_filter(
	'action_scheduler_queue_runner_concurrent_batches',
	static function ( $batches ) {
		$configured = getenv( 'AS_CONCURRENT_BATCHES' );
		if ( false === $configured || ! ctype_digit( $configured ) || (int) $configured < 1 ) {
			return $batches;
		}
		return (int) $configured;
	}
);

// Web requests must not start batches of their own next to the workers.
add_filter( 'action_scheduler_allow_async_request_runner', '__return_false' );

add_action(
	'init',
	static function () {
		if ( class_exists( 'ActionScheduler_QueueRunner' ) ) {
			remove_action(
				ActionScheduler_QueueRunner::WP_CRON_HOOK,
				array( ActionScheduler_QueueRunner::instance(), 'run' )
			);
		}
	},
	20
);

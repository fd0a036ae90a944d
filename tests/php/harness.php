<?php
define( 'ABSPATH', '/tmp/' );
$GLOBALS['hooks'] = array();
function add_filter( $hook, $callback, $priority = 10 ) { $GLOBALS['hooks'][ $hook ][] = array( $priority, $callback ); }
function add_action( $hook, $callback, $priority = 10 ) { add_filter( $hook, $callback, $priority ); }
function remove_action( $hook, $callback ) {
	foreach ( $GLOBALS['hooks'][ $hook ] ?? array() as $i => $entry ) {
		if ( $entry[1] == $callback ) { unset( $GLOBALS['hooks'][ $hook ][ $i ] ); }
	}
}
function apply_filters( $hook, $value ) {
	foreach ( $GLOBALS['hooks'][ $hook ] ?? array() as $entry ) { $value = call_user_func( $entry[1], $value ); }
	return $value;
}
function do_action( $hook ) { apply_filters( $hook, null ); }
function __return_false() { return false; }
class ActionScheduler_QueueRunner {
	const WP_CRON_HOOK = 'action_scheduler_run_queue';
	private static $runner = null;
	public static function instance() { return self::$runner ?? ( self::$runner = new self() ); }
	public function run() { return 0; }
}
// Action Scheduler hooks its WP-Cron runner, as it does on every request.
add_action( ActionScheduler_QueueRunner::WP_CRON_HOOK, array( ActionScheduler_QueueRunner::instance(), 'run' ) );
// argv[1]: the plugin ('-': none); argv[2], optional: PHP code run as `wp eval` runs it.
if ( '-' !== $argv[1] ) { require $argv[1]; }
do_action( 'init' );
if ( isset( $argv[2] ) ) { eval( $argv[2] ); exit( 0 ); }
echo json_encode( array(
	'batches'   => apply_filters( 'action_scheduler_queue_runner_concurrent_batches', 1 ),
	'async'     => apply_filters( 'action_scheduler_allow_async_request_runner', true ),
	'wp_cron'   => count( $GLOBALS['hooks'][ ActionScheduler_QueueRunner::WP_CRON_HOOK ] ),
) );

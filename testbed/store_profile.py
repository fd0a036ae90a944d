"""What a realistic store's Action Scheduler tables hold, as numbers the generator follows.

Shares from the issue's measured store: about 93 % complete, 3 % failed, 1 % canceled, a
due backlog of 20,000 actions, the rest pending in the future (renewals, reminders), 40
hooks with a skewed (Zipf) distribution, and one batch running at the time of the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

# (hook, group) pairs, most frequent first: webhooks and analytics imports dominate a
# WooCommerce store's queue; subscriptions, e-mails and plugins' own jobs follow.
HOOKS: tuple[tuple[str, str], ...] = (
    ("woocommerce_deliver_webhook_async", "woocommerce-webhooks"),
    ("wc-admin_import_orders", "wc-admin-data"),
    ("woocommerce_run_product_attribute_lookup_update_callback", "woocommerce-db-updates"),
    ("woocommerce_scheduled_subscription_payment", "woocommerce-subscriptions"),
    ("action_scheduler/migration_hook", ""),
    ("wc-admin_import_customers", "wc-admin-data"),
    ("woocommerce_cleanup_draft_orders", ""),
    ("woocommerce_scheduled_sales", ""),
    ("wc_facebook_regenerate_feed", "facebook-for-woocommerce"),
    ("mailpoet_cron_worker", "mailpoet-cron"),
    ("woocommerce_scheduled_subscription_expiration", "woocommerce-subscriptions"),
    ("woocommerce_scheduled_subscription_trial_end", "woocommerce-subscriptions"),
    ("woocommerce_scheduled_subscription_end_of_prepaid_term", "woocommerce-subscriptions"),
    ("wcs_send_renewal_reminder", "woocommerce-subscriptions"),
    ("woocommerce_cancel_unpaid_orders", ""),
    ("wc-admin_process_orders_milestone", "wc-admin-data"),
    ("woocommerce_cleanup_sessions", ""),
    ("woocommerce_geoip_updater", ""),
    ("wc_stripe_webhook_retry", "woocommerce-gateway-stripe"),
    ("wc_stripe_sync_payment_methods", "woocommerce-gateway-stripe"),
    ("klaviyo_sync_customer", "klaviyo"),
    ("klaviyo_sync_order", "klaviyo"),
    ("google_listings_and_ads_sync_product", "gla"),
    ("google_listings_and_ads_delete_product", "gla"),
    ("woocommerce_update_marketplace_suggestions", ""),
    ("woocommerce_tracker_send_event", ""),
    ("wc_pinterest_sync_catalog", "pinterest-for-woocommerce"),
    ("yoast_seo_indexables_rebuild", "yoast"),
    ("rank_math/analytics/daily_tasks", "rank-math"),
    ("wpforms_process_entry_emails", "wpforms"),
    ("automatewoo_four_hourly_worker", "automatewoo"),
    ("automatewoo_custom_time_of_day_workflow", "automatewoo"),
    ("woocommerce_shipstation_export_orders", "shipstation"),
    ("wc_square_sync_inventory", "woocommerce-square"),
    ("jetpack_sync_full", "jetpack"),
    ("woocommerce_admin/stored_state_setup_for_products/async/run_remote_notifications", ""),
    ("wc_points_rewards_apply_points", "points-and-rewards"),
    ("woocommerce_bookings_reminder", "woocommerce-bookings"),
    ("wc_memberships_grant_access", "woocommerce-memberships"),
    ("woocommerce_gzd_dhl_import_parcel_shops", "germanized"),
)
ZIPF_EXPONENT = 1.1
FAILURE_MESSAGES = (
    "Supplier API unreachable",
    "cURL error 28: Operation timed out after 30001 milliseconds",
    "Webhook delivery failed: 500 Internal Server Error",
    "Payment gateway declined the renewal",
)


@dataclass(frozen=True)
class StoreProfile:
    actions: int
    due: int = 20_000
    failed_share: float = 0.03
    canceled_share: float = 0.01
    future_share: float = 0.03
    batch_size: int = 25  # one batch running: one in-progress action, the rest claimed
    seed: int = 8

    @property
    def name(self) -> str:
        due = "" if self.due == StoreProfile.due else f"_due{_short(self.due)}"
        future = ""
        if self.future_share != StoreProfile.future_share:
            future = f"_future{_short(round(self.actions * self.future_share))}"
        return f"store_{_short(self.actions)}{due}{future}"


def hook_weights() -> list[float]:
    return [1 / rank**ZIPF_EXPONENT for rank in range(1, len(HOOKS) + 1)]


def _short(count: int) -> str:
    for unit, size in (("m", 1_000_000), ("k", 1_000)):
        if count >= size and count % size == 0:
            return f"{count // size}{unit}"
    return str(count)

ALTER TABLE `request_logs` ADD `cost_nano_usd` integer;--> statement-breakpoint
ALTER TABLE `usage_daily_rollups` ADD `cost_nano_usd` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_rollups` ADD `cost_nano_usd` integer DEFAULT 0 NOT NULL;
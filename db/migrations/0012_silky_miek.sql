ALTER TABLE `inference_keys` ADD `limits` text;--> statement-breakpoint
ALTER TABLE `request_logs` ADD `cost_usd` real;--> statement-breakpoint
ALTER TABLE `usage_daily_rollups` ADD `cost_usd` real DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_daily_rollups` ADD `unpriced` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_rollups` ADD `cost_usd` real DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_rollups` ADD `unpriced` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Requests logged before costs were recorded cost an unknown amount: counted as unpriced, never as $0.
UPDATE `usage_daily_rollups` SET `unpriced` = `requests`;--> statement-breakpoint
UPDATE `usage_rollups` SET `unpriced` = `requests`;

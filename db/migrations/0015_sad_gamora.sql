ALTER TABLE `request_logs` DROP COLUMN `cost_usd`;--> statement-breakpoint
ALTER TABLE `usage_daily_rollups` DROP COLUMN `cost_usd`;--> statement-breakpoint
ALTER TABLE `usage_rollups` DROP COLUMN `cost_usd`;
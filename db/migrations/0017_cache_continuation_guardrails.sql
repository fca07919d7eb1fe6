ALTER TABLE `workspaces` ADD `cache_purged_at` integer;--> statement-breakpoint
ALTER TABLE `inference_keys` ADD `cache` text;--> statement-breakpoint
ALTER TABLE `inference_keys` ADD `cache_purged_at` integer;--> statement-breakpoint
ALTER TABLE `inference_keys` ADD `continuation` text;--> statement-breakpoint
ALTER TABLE `inference_keys` ADD `guardrails` text;--> statement-breakpoint
ALTER TABLE `request_logs` ADD `cache` text;--> statement-breakpoint
ALTER TABLE `request_logs` ADD `saved_nano_usd` integer;--> statement-breakpoint
ALTER TABLE `request_logs` ADD `continued` integer;--> statement-breakpoint
ALTER TABLE `request_logs` ADD `guardrails` text;--> statement-breakpoint
ALTER TABLE `usage_daily_rollups` ADD `cache_hits` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_daily_rollups` ADD `saved_nano_usd` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_rollups` ADD `cache_hits` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `usage_rollups` ADD `saved_nano_usd` integer DEFAULT 0 NOT NULL;
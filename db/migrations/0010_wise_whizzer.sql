CREATE TABLE `audit_events` (
	`seq` integer PRIMARY KEY NOT NULL,
	`id` text NOT NULL,
	`time` text NOT NULL,
	`workspace_id` text NOT NULL,
	`actor_kind` text NOT NULL,
	`actor_id` text,
	`actor_prefix` text,
	`via` text NOT NULL,
	`action` text NOT NULL,
	`target_type` text NOT NULL,
	`target_id` text NOT NULL,
	`changes` text NOT NULL,
	`caller_ip` text,
	`request_id` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `audit_events_id_unique` ON `audit_events` (`id`);--> statement-breakpoint
CREATE INDEX `audit_events_workspace_seq_idx` ON `audit_events` (`workspace_id`,`seq`);--> statement-breakpoint
CREATE INDEX `audit_events_target_idx` ON `audit_events` (`workspace_id`,`target_id`);
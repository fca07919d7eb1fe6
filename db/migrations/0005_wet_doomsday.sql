CREATE TABLE `batches` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`key_id` text NOT NULL,
	`provider_key_id` text NOT NULL,
	`upstream_id` text,
	`endpoint` text NOT NULL,
	`model` text NOT NULL,
	`upstream_model` text NOT NULL,
	`status` text NOT NULL,
	`request_total` integer DEFAULT 0 NOT NULL,
	`request_completed` integer DEFAULT 0 NOT NULL,
	`request_failed` integer DEFAULT 0 NOT NULL,
	`cost` real,
	`error` text,
	`created_at` integer NOT NULL,
	`finalized_at` integer,
	`refreshed_at` integer,
	`purged_at` integer
);
--> statement-breakpoint
CREATE INDEX `batches_key_created_idx` ON `batches` (`key_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `batches_status_idx` ON `batches` (`status`);--> statement-breakpoint
CREATE TABLE `job_leases` (
	`job` text PRIMARY KEY NOT NULL,
	`holder` text,
	`locked_until` integer DEFAULT 0 NOT NULL,
	`next_run_at` integer DEFAULT 0 NOT NULL,
	`last_finished_at` integer,
	`last_result` text
);
--> statement-breakpoint
CREATE TABLE `outbox` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`batch_id` text NOT NULL,
	`key_id` text NOT NULL,
	`event` text NOT NULL,
	`payload` text NOT NULL,
	`created_at` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`last_error` text,
	`delivered_at` integer,
	`dropped_at` integer
);
--> statement-breakpoint
CREATE INDEX `outbox_pending_idx` ON `outbox` (`delivered_at`,`dropped_at`);
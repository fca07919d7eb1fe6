CREATE TABLE `management_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`prefix` text NOT NULL,
	`secret_hash` text NOT NULL,
	`read_only` integer DEFAULT false NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `management_keys_prefix_idx` ON `management_keys` (`prefix`);--> statement-breakpoint
CREATE TABLE `members` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`email` text NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `members_workspace_idx` ON `members` (`workspace_id`);--> statement-breakpoint
CREATE TABLE `workspaces` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`kind` text DEFAULT 'team' NOT NULL,
	`allowed_ips` text DEFAULT '[]' NOT NULL,
	`steering_message` text,
	`capture_bodies` integer DEFAULT false NOT NULL,
	`suspended` integer DEFAULT false NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `gateway_settings` (
	`gateway` text PRIMARY KEY NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `provider_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`gateway` text NOT NULL,
	`label` text DEFAULT '' NOT NULL,
	`secret_ciphertext` text NOT NULL,
	`key_last4` text NOT NULL,
	`config` text DEFAULT '{}' NOT NULL,
	`created_at` text NOT NULL,
	`disabled_at` text,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `provider_keys_workspace_idx` ON `provider_keys` (`workspace_id`);--> statement-breakpoint
CREATE TABLE `inference_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`workspace_id` text NOT NULL,
	`label` text,
	`key_prefix` text NOT NULL,
	`secret_hash` text NOT NULL,
	`previous_key_prefix` text,
	`previous_secret_hash` text,
	`previous_secret_until` text,
	`api_shape` text DEFAULT 'chat' NOT NULL,
	`companion_ads` integer DEFAULT false NOT NULL,
	`keyterms` integer DEFAULT false NOT NULL,
	`allowed_ips` text DEFAULT '[]' NOT NULL,
	`steering_message` text,
	`failover_ttfb_ms` integer,
	`upstream_timeout_ms` integer,
	`routing_strategy` text DEFAULT 'priority' NOT NULL,
	`decisioner` text,
	`webhook_url` text,
	`webhook_secret_ciphertext` text,
	`notify_email` integer DEFAULT false NOT NULL,
	`created_at` text NOT NULL,
	`last_used_at` text,
	`revoked_at` text,
	FOREIGN KEY (`workspace_id`) REFERENCES `workspaces`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `inference_keys_workspace_idx` ON `inference_keys` (`workspace_id`);--> statement-breakpoint
CREATE INDEX `inference_keys_prefix_idx` ON `inference_keys` (`key_prefix`);--> statement-breakpoint
CREATE INDEX `inference_keys_previous_prefix_idx` ON `inference_keys` (`previous_key_prefix`);--> statement-breakpoint
CREATE TABLE `key_mcp_servers` (
	`id` text PRIMARY KEY NOT NULL,
	`key_id` text NOT NULL,
	`name` text,
	`url` text NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`key_id`) REFERENCES `inference_keys`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `key_mcp_servers_key_idx` ON `key_mcp_servers` (`key_id`);--> statement-breakpoint
CREATE TABLE `model_remaps` (
	`key_id` text NOT NULL,
	`position` integer NOT NULL,
	`match` text NOT NULL,
	`percent` integer DEFAULT 100 NOT NULL,
	`provider_key_id` text NOT NULL,
	`upstream_model` text NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	PRIMARY KEY(`key_id`, `position`),
	FOREIGN KEY (`key_id`) REFERENCES `inference_keys`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`provider_key_id`) REFERENCES `provider_keys`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `model_remaps_provider_idx` ON `model_remaps` (`provider_key_id`);--> statement-breakpoint
CREATE TABLE `routing_targets` (
	`key_id` text NOT NULL,
	`position` integer NOT NULL,
	`provider_key_id` text NOT NULL,
	`weight` integer,
	`ttfb_ms` integer,
	PRIMARY KEY(`key_id`, `position`),
	FOREIGN KEY (`key_id`) REFERENCES `inference_keys`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`provider_key_id`) REFERENCES `provider_keys`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `routing_targets_provider_idx` ON `routing_targets` (`provider_key_id`);--> statement-breakpoint
CREATE TABLE `request_logs` (
	`seq` integer PRIMARY KEY NOT NULL,
	`id` text NOT NULL,
	`workspace_id` text NOT NULL,
	`key_id` text,
	`created_at` integer NOT NULL,
	`endpoint` text NOT NULL,
	`gateway` text,
	`provider_key_id` text,
	`model` text,
	`upstream_model` text,
	`status` integer NOT NULL,
	`error_code` text,
	`stream` integer DEFAULT false NOT NULL,
	`latency_ms` real NOT NULL,
	`overhead_ms` real,
	`ttfb_ms` real,
	`attempts` integer DEFAULT 0 NOT NULL,
	`attempt_path` text,
	`stage_timings` text,
	`input_tokens` integer,
	`output_tokens` integer,
	`client_ip` text,
	`request_body` text
);
--> statement-breakpoint
CREATE INDEX `request_logs_workspace_time_idx` ON `request_logs` (`workspace_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `gateway_budgets` (
	`gateway` text PRIMARY KEY NOT NULL,
	`ttfb_budget_ms` integer NOT NULL,
	`computed_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `gateway_catalogs` (
	`gateway` text PRIMARY KEY NOT NULL,
	`fetched_at` integer NOT NULL,
	`model_count` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `gateway_models` (
	`gateway` text NOT NULL,
	`model_id` text NOT NULL,
	`canonical_id` text NOT NULL,
	`object` text NOT NULL,
	PRIMARY KEY(`gateway`, `model_id`)
);

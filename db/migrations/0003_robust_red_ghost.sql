DROP INDEX `request_logs_workspace_time_idx`;--> statement-breakpoint
CREATE UNIQUE INDEX `request_logs_workspace_time_id_idx` ON `request_logs` (`workspace_id`,`created_at`,`id`);
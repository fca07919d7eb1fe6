DROP INDEX `request_logs_workspace_time_id_idx`;--> statement-breakpoint
CREATE INDEX `request_logs_workspace_time_idx` ON `request_logs` (`workspace_id`,`created_at`);
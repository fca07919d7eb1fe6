CREATE TABLE `usage_rollups` (
	`workspace_id` text NOT NULL,
	`hour` integer NOT NULL,
	`key_id` text DEFAULT '' NOT NULL,
	`model` text DEFAULT '' NOT NULL,
	`gateway` text DEFAULT '' NOT NULL,
	`requests` integer DEFAULT 0 NOT NULL,
	`errors` integer DEFAULT 0 NOT NULL,
	`latency_sum` real DEFAULT 0 NOT NULL,
	`latency_count` integer DEFAULT 0 NOT NULL,
	`overhead_sum` real DEFAULT 0 NOT NULL,
	`overhead_count` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`workspace_id`, `hour`, `key_id`, `model`, `gateway`)
);
--> statement-breakpoint
-- The roll-ups of the rows already written (usage queries read the roll-ups from now on).
INSERT INTO `usage_rollups` (`workspace_id`, `hour`, `key_id`, `model`, `gateway`, `requests`, `errors`, `latency_sum`, `latency_count`, `overhead_sum`, `overhead_count`, `input_tokens`, `output_tokens`)
SELECT `workspace_id`, (`created_at` / 3600000) * 3600000, coalesce(`key_id`, ''), coalesce(`model`, ''), coalesce(`gateway`, ''),
  count(*), sum(CASE WHEN `status` >= 400 THEN 1 ELSE 0 END), coalesce(sum(`latency_ms`), 0), count(`latency_ms`),
  coalesce(sum(`overhead_ms`), 0), count(`overhead_ms`), coalesce(sum(`input_tokens`), 0), coalesce(sum(`output_tokens`), 0)
FROM `request_logs`
GROUP BY 1, 2, 3, 4, 5;

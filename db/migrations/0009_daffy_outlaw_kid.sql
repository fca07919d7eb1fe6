CREATE TABLE `usage_daily_rollups` (
	`workspace_id` text NOT NULL,
	`day` integer NOT NULL,
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
	PRIMARY KEY(`workspace_id`, `day`, `key_id`, `model`, `gateway`)
);
--> statement-breakpoint
-- The day roll-ups of the hours already rolled up (usage queries read them from now on).
INSERT INTO `usage_daily_rollups` (`workspace_id`, `day`, `key_id`, `model`, `gateway`, `requests`, `errors`, `latency_sum`, `latency_count`, `overhead_sum`, `overhead_count`, `input_tokens`, `output_tokens`)
SELECT `workspace_id`, (`hour` / 86400000) * 86400000, `key_id`, `model`, `gateway`,
  sum(`requests`), sum(`errors`), sum(`latency_sum`), sum(`latency_count`),
  sum(`overhead_sum`), sum(`overhead_count`), sum(`input_tokens`), sum(`output_tokens`)
FROM `usage_rollups`
GROUP BY 1, 2, 3, 4, 5;

-- Costs in whole nano-dollars (CONTRACT §11, money counted exactly): each stored USD cost to the nearest billionth. A row's unknown cost stays null.
update request_logs set cost_nano_usd = cast(round(cost_usd * 1000000000) as integer) where cost_usd is not null;--> statement-breakpoint
update usage_rollups set cost_nano_usd = cast(round(cost_usd * 1000000000) as integer) where cost_usd is not null;--> statement-breakpoint
update usage_daily_rollups set cost_nano_usd = cast(round(cost_usd * 1000000000) as integer) where cost_usd is not null;

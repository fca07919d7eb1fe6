ALTER TABLE `batches` ADD `reserved_nano_usd` integer;--> statement-breakpoint
ALTER TABLE `batches` ADD `charged_nano_usd` integer;
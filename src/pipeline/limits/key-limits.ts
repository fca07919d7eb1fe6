/** A key's limits live on the floor (domain/key-limits.ts); re-exported for the pipeline's imports. */
export * from '../../domain/key-limits'

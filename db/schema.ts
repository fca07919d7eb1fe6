/** drizzle-kit's schema entry: the tables live in src/storage/schema. */
export * from '../src/storage/schema'

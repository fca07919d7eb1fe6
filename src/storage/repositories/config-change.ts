/**
 * What a configuration write touched, for the snapshot (storage/snapshot.ts): one row it holds, read
 * again on its own; `none`, nothing it holds (members, management keys). A write that passes none
 * (a delete that cascades, a catalog) may have touched anything.
 */
export type ConfigChange = { table: 'keys' | 'providers' | 'workspaces'; id: string } | { table: 'none' }

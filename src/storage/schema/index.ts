/** Every table of the service; drizzle-kit reads this through db/schema.ts. */
export * from './workspaces'
export * from './provider-keys'
export * from './inference-keys'
export * from './request-logs'
export * from './gateway-catalogs'

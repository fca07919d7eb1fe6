/** A test server with several gateway kinds, each pointed at its own mock, and a provider key per kind. */
import { startMockGateway, type MockGateway } from './mock-gateway'
import { startTestServer, type TestServer } from './server'
import { storeProvider } from './api'
import { gatewayOverrideSlug } from '../../src/gateways/catalog'

export interface GatewaysEnv extends AsyncDisposable {
  server: TestServer
  mocks: Record<string, MockGateway>
  /** gateway slug → provider key id */
  providers: Record<string, string>
}

export async function startGateways(
  gateways: readonly string[],
  extraEnv: Record<string, string> = {},
  providerBody: (gateway: string) => Record<string, unknown> = (gateway) => ({ gateway, key: `sk-${gateway}-secret` }),
): Promise<GatewaysEnv> {
  const mocks: Record<string, MockGateway> = {}
  for (const gateway of gateways) mocks[gateway] = await startMockGateway()
  const overrides: Record<string, string> = {}
  for (const gateway of gateways) overrides[`RT_GATEWAY_URL_${gatewayOverrideSlug(gateway)}`] = mocks[gateway]!.url
  const server = await startTestServer({ ...overrides, ...extraEnv })
  const providers: Record<string, string> = {}
  for (const gateway of gateways) providers[gateway] = (await storeProvider(server, providerBody(gateway))).id
  return {
    server,
    mocks,
    providers,
    async [Symbol.asyncDispose]() {
      await server[Symbol.asyncDispose]()
      for (const mock of Object.values(mocks)) await mock.close()
    },
  }
}

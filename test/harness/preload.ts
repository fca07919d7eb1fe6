/**
 * Loaded before every test file (bunfig.toml `[test] preload`). Hooks registered here apply to the
 * tests of every file. A hook registered at the top of a shared module would apply to the first
 * file that imports the module only.
 */
import { afterEach } from 'bun:test'
import { cleanUpServices } from './service-process'

afterEach(cleanUpServices)

/** One JSON line per event on stdout (CONTRACT §8). Callers never pass secrets. */
import type { LogLevel } from '../config/env'

const levelOrder: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

export interface Logger {
  debug(event: string, fields?: Record<string, unknown>): void
  info(event: string, fields?: Record<string, unknown>): void
  warn(event: string, fields?: Record<string, unknown>): void
  error(event: string, fields?: Record<string, unknown>): void
}

export function createLogger(level: LogLevel, write: (line: string) => void = (line) => process.stdout.write(line)): Logger {
  const threshold = levelOrder[level]
  const emit = (eventLevel: LogLevel, event: string, fields?: Record<string, unknown>) => {
    if (levelOrder[eventLevel] < threshold) return
    write(JSON.stringify({ time: new Date().toISOString(), level: eventLevel, event, ...fields }) + '\n')
  }
  return {
    debug: (event, fields) => emit('debug', event, fields),
    info: (event, fields) => emit('info', event, fields),
    warn: (event, fields) => emit('warn', event, fields),
    error: (event, fields) => emit('error', event, fields),
  }
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} }

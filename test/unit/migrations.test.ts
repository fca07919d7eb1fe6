import { describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readMigrationFiles } from 'drizzle-orm/migrator'
import { embeddedMigrations, migrationTexts } from '../../src/storage/migrations'

const folder = join(import.meta.dir, '../../db/migrations')

describe('the migrations the program carries', () => {
  test('are every migration of db/migrations, as drizzle-kit wrote them', () => {
    const files = readdirSync(folder).filter((name) => name.endsWith('.sql')).map((name) => name.slice(0, -'.sql'.length)).sort()
    expect(Object.keys(migrationTexts).sort()).toEqual(files)
    for (const tag of files) expect(migrationTexts[tag]).toBe(readFileSync(join(folder, `${tag}.sql`), 'utf8'))
  })

  test("are what drizzle's folder reader builds from the folder (statements, breakpoints, times, hashes)", () => {
    expect(embeddedMigrations()).toEqual(readMigrationFiles({ migrationsFolder: folder }))
  })
})

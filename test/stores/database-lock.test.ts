/**
 * One server per database, however the database is named: the lock is taken on the file's real
 * path, so a symlink to the file, or to a directory on its path, or a relative path, meets the
 * same lock (an adversarial review ran two servers on one file through a symlink).
 */
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lockSqliteDatabase } from '../../src/stores/sqlite/database-lock.js';

const dirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-lock-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('lockSqliteDatabase', () => {
  it.each([
    ['a symlink to the file', (dir: string, db: string) => symlinkAt(db, join(dir, 'link.db'))],
    [
      'a symlink to its directory',
      (dir: string) => join(symlinkAt(join(dir, 'data'), join(dir, 'alias')), 'app.db'),
    ],
    ['a relative path', (_dir: string, db: string) => relative(process.cwd(), db)],
  ])('refuses a second lock through %s, and takes it once the first is released', (_, other) => {
    const dir = scratch();
    const db = join(dir, 'data', 'app.db');
    const first = lockSqliteDatabase(db);
    writeFileSync(db, ''); // the database exists by the time a second server starts
    const alias = other(dir, db);
    expect(() => lockSqliteDatabase(alias)).toThrow(/in use by another runplane serve/);
    first.release();
    const second = lockSqliteDatabase(alias);
    expect(second.path).toBe(first.path);
    second.release();
  });

  it('meets the same lock through a symlink whose target is not created yet, either way round', () => {
    for (const linkFirst of [true, false]) {
      const dir = scratch();
      const db = join(dir, 'data', 'app.db'); // neither the file nor its directory exists
      const link = relative(
        process.cwd(),
        symlinkAt(join('data', 'app.db'), join(dir, 'alias.db')),
      );
      const first = lockSqliteDatabase(linkFirst ? link : db);
      expect(() => lockSqliteDatabase(linkFirst ? db : link)).toThrow(
        /in use by another runplane serve/,
      );
      expect(first.path).toBe(`${db}.lock`);
      first.release();
    }
  });
});

function symlinkAt(target: string, path: string): string {
  symlinkSync(target, path);
  return path;
}

/**
 * Checks runplane as a new user gets it (README "Install"): `npm pack` (which builds dist/ from
 * scratch), a fresh project (`npm init -y`), `npm install` of the tarball with zod, TypeScript
 * and @types/node beside it, then a small ESM program there that imports `runplane`,
 * `runplane/testing`, `runplane/stores/sqlite` and `runplane/server` and runs one run end to end
 * through each (the server one over HTTP on 127.0.0.1); then the `runplane` command's `--help`.
 * The program is type-checked against the installed declarations with `skipLibCheck: false`
 * before it runs, first without the optional peer fast-check (whose absence only the race
 * properties may notice), then again after `npm install fast-check`, with a short race property.
 *
 * Usage: `npm run check:package`. It needs the npm registry and takes minutes, most of them npm
 * install and better-sqlite3's build where no prebuilt binary can be fetched, so CI runs it
 * after `npm test` rather than inside it. `--keep` leaves the temporary project in place; a
 * failure always leaves it and prints its path.
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const keep = process.argv.includes('--keep');

/**
 * Declaration errors that the lead's rewrite of src/run and src/runtime removes: `stripInternal`
 * drops an `@internal` declaration that a published one still names. Each entry is a file and
 * the name that must be missing; the check fails when one of them no longer occurs, so this list
 * shrinks with the fixes, and on any other error.
 */
const pendingDeclarationErrors: readonly (readonly [file: string, name: string])[] = [];

/** The user's program: every entry point, one run each. */
const consumerProgram = String.raw`
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import {
  createReActAgent,
  createRuntime,
  createScriptedModel,
  defineTool,
  type Agent,
} from 'runplane';
import { createScriptedAgent, createTestClock, runRaceProperty } from 'runplane/testing';
import {
  createSqliteEventLog,
  createSqliteInbox,
  createSqliteSessionStore,
  openSqliteDatabase,
} from 'runplane/stores/sqlite';
import { startServer } from 'runplane/server';

function check(ok: boolean, what: string): asserts ok {
  if (!ok) throw new Error('package check failed: ' + what);
}

const dir = mkdtempSync(join(tmpdir(), 'runplane-consumer-'));
try {
  // runplane: the README's ReAct agent with a zod tool.
  const add = defineTool({
    name: 'add',
    description: 'Adds two numbers',
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: ({ a, b }) => a + b,
  });
  const model = createScriptedModel([
    { toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }] },
    { text: ['2 + 3 = ', '5'] },
  ]);
  const runtime = createRuntime();
  const agent = createReActAgent({ model, tools: [add] });
  const run = runtime.prepare({ ownerId: 'alice', sessionId: 'math', agent, input: '2 + 3?' });
  run.start();
  const result = await run.result();
  check(result.reply === '2 + 3 = 5', 'runplane: reply ' + JSON.stringify(result.reply));
  check((await runtime.shutdown({ graceMs: 0 })).drained, 'runplane: drained');
  console.log('runplane: ReAct run', run.status, JSON.stringify(result.reply));

  // runplane/testing: a puppet agent on a clock that moves only when told.
  const clock = createTestClock();
  const testRuntime = createRuntime({ clock });
  const puppet = createScriptedAgent<string>();
  const puppetRun = testRuntime.prepare({ ownerId: 'alice', sessionId: 's', agent: puppet, input: 'hi' });
  puppetRun.start();
  await puppet.started(puppetRun.id);
  puppet.complete(puppetRun.id, 'done');
  check((await puppetRun.result()) === 'done', 'runplane/testing: result');
  await testRuntime.shutdown({ graceMs: 0 });
  console.log('runplane/testing: scripted run', puppetRun.status);
  // Without the optional peer, only the race properties refuse, and say why.
  const missingPeer = await runRaceProperty(() => createRuntime()).then(
    () => undefined,
    (error: unknown) => error,
  );
  check(
    missingPeer instanceof Error && missingPeer.message.includes('npm install --save-dev fast-check'),
    'runplane/testing without fast-check: ' + String(missingPeer),
  );
  console.log('runplane/testing without fast-check:', missingPeer.message);

  // runplane/stores/sqlite: a run whose events land in a SQLite file.
  const database = openSqliteDatabase({ path: join(dir, 'embedded.db') });
  const eventLog = createSqliteEventLog({ database });
  const sqliteRuntime = createRuntime({
    stores: {
      eventLog,
      sessionStore: createSqliteSessionStore({ database }),
      inbox: createSqliteInbox({ database }),
    },
  });
  const echo: Agent<string, string> = { execute: async (input) => input };
  const stored = sqliteRuntime.prepare({ ownerId: 'alice', sessionId: 'db', agent: echo, input: 'x' });
  stored.start();
  await stored.termination;
  await sqliteRuntime.shutdown({ graceMs: 0 });
  const types = (await eventLog.read({}, { ownerId: 'alice', sessionId: 'db' })).map((e) => e.type);
  check(types.includes('run.completed'), 'runplane/stores/sqlite: events ' + types.join(','));
  database.close();
  console.log('runplane/stores/sqlite:', types.length, 'events, last', types.at(-1));

  // runplane/server: one message over HTTP, followed on the SSE stream until the run completes.
  const server = await startServer({
    host: '127.0.0.1',
    port: 0,
    dbPath: join(dir, 'serve.db'),
    chunkDelayMs: 0,
    log: () => {},
  });
  try {
    const headers = {
      authorization: 'Bearer ' + String(server.devToken),
      'content-type': 'application/json',
    };
    const session = (await (
      await fetch(server.url + '/api/sessions', { method: 'POST', headers })
    ).json()) as { session_id: string };
    const sent = (await (
      await fetch(server.url + '/api/sessions/' + session.session_id + '/events', {
        method: 'POST',
        headers,
        body: JSON.stringify({ events: [{ type: 'user.message', payload: { text: 'what is (2 + 3) * 7?' } }] }),
      })
    ).json()) as { results: { result: string; run_id: string }[] };
    check(sent.results[0]?.result === 'accepted', 'runplane/server: ' + JSON.stringify(sent));
    const stream = await fetch(
      server.url + '/api/sessions/' + session.session_id + '/events/stream?after=0',
      { headers, signal: AbortSignal.timeout(30_000) },
    );
    const decoder = new TextDecoder();
    let frames = '';
    for await (const chunk of stream.body as unknown as AsyncIterable<Uint8Array>) {
      frames += decoder.decode(chunk, { stream: true });
      if (frames.includes('event: run.completed')) break;
    }
    check(frames.includes('event: run.completed'), 'runplane/server: no run.completed frame');
    console.log('runplane/server: run.completed on the SSE stream over HTTP');
  } finally {
    await server.shutdown({ graceMs: 0 });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
`;

/** With the optional peer installed: a short race property from runplane/testing. */
const racePropertyProgram = String.raw`
import { createRuntime } from 'runplane';
import { runRaceProperty } from 'runplane/testing';

const report = await runRaceProperty(
  ({ clock, reportError, inspect }) => createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 100 }),
  { numRuns: 5 },
);
console.log('runplane/testing: runRaceProperty,', report.numRuns, 'interleavings passed');
`;

function sh(cwd: string, command: string, args: readonly string[]): string {
  return execFileSync(command, args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** Type-checks the project; fails on any error but the pending ones, and when one of those is gone. */
function typecheck(project: string): void {
  let output = '';
  try {
    sh(project, 'npx', ['tsc', '-p', '.']);
  } catch (error) {
    output = String((error as { stdout?: unknown }).stdout ?? error);
  }
  const errors = output.split('\n').filter((line) => /error TS\d+/.test(line));
  const pending = (line: string) =>
    pendingDeclarationErrors.some(
      ([file, name]) => line.includes(file) && line.includes(`'${name}'`),
    );
  const unexpected = errors.filter((line) => !pending(line));
  const fixed = pendingDeclarationErrors.filter(
    ([file, name]) => !errors.some((line) => line.includes(file) && line.includes(`'${name}'`)),
  );
  if (unexpected.length > 0) throw new Error(`type errors:\n${unexpected.join('\n')}`);
  if (fixed.length > 0) {
    throw new Error(
      `fixed, remove from pendingDeclarationErrors: ${fixed.map((f) => f.join(' ')).join('; ')}`,
    );
  }
  console.log(`types: clean with skipLibCheck false (${errors.length} pending declaration errors)`);
}

const work = mkdtempSync(join(tmpdir(), 'runplane-package-'));
try {
  const packed = JSON.parse(sh(root, 'npm', ['pack', '--json', '--pack-destination', work])) as {
    filename: string;
    files: { path: string }[];
  }[];
  const tarball = join(work, packed[0]!.filename);
  console.log(`packed ${tarball}: ${packed[0]!.files.length} files`);

  const project = join(work, 'app');
  mkdirSync(project);
  sh(project, 'npm', ['init', '-y']);
  sh(project, 'npm', ['pkg', 'set', 'type=module']);
  // Install scripts off: better-sqlite3 would compile itself from source here (no prebuilt
  // binary can be fetched), minutes on two cores. The repository's own build of the same
  // version is copied in instead; the check is about runplane's package, not the native build.
  sh(project, 'npm', [
    'install',
    '--no-audit',
    '--no-fund',
    '--ignore-scripts',
    tarball,
    'zod@^4',
    'typescript@5.9.3',
    '@types/node@^20',
  ]);
  cpSync(
    join(root, 'node_modules/better-sqlite3/build'),
    join(project, 'node_modules/better-sqlite3/build'),
    { recursive: true },
  );
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2023', 'DOM'],
        types: ['node'],
        strict: true,
        skipLibCheck: false,
        outDir: 'out',
      },
      include: ['*.ts'],
    }),
  );
  writeFileSync(join(project, 'main.ts'), consumerProgram);
  typecheck(project);
  process.stdout.write(sh(project, 'node', ['out/main.js']));
  const help = sh(project, 'npx', ['--no-install', 'runplane', '--help']);
  if (!help.includes('serve')) throw new Error(`runplane --help printed:\n${help}`);
  console.log('runplane --help: the installed command answers');

  sh(project, 'npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', 'fast-check@^4']);
  writeFileSync(join(project, 'race.ts'), racePropertyProgram);
  typecheck(project);
  process.stdout.write(sh(project, 'node', ['out/race.js']));

  const zodCopies = sh(project, 'npm', ['ls', 'zod', '--all', '--parseable']).trim().split('\n');
  if (new Set(zodCopies).size !== 1)
    throw new Error(`zod is installed twice: ${zodCopies.join(', ')}`);
  console.log(`package check passed (${readdirSync(project).join(' ')})`);
  if (!keep) rmSync(work, { recursive: true, force: true });
} catch (error) {
  console.error(`package check failed; the project is kept in ${work}`);
  throw error;
}

/**
 * The `runplane serve` command: flags and environment variables (util.parseArgs), then
 * {@link startServer} until SIGTERM or SIGINT.
 *
 * @module
 */
import { parseArgs } from 'node:util';
import { checkRedisUrl, redactRedisUrl } from '../cluster/redis-url.js';
import { InvalidArgumentError, RunplaneError } from '../errors.js';
import { logFormats, logLevels } from '../observability/logger.js';
import { traceparentModes } from './serve-observability.js';
import { serveUntilSignal, startServer, type ServeOptions } from './serve.js';

/** The options part of the help of `runplane serve` (`runplane --help` lists it too). */
export const serveOptionsUsage = `Options of serve (a flag wins over its environment variable):
  --host <host>             interface to listen on           RUNPLANE_HOST    (default 127.0.0.1)
  --port <port>             TCP port, 0 for any free one     RUNPLANE_PORT    (default 8787)
  --db <path>               SQLite database file             RUNPLANE_DB      (default ./.runplane/runplane.db)
  --redis <url>             run as one instance of a cluster RUNPLANE_REDIS_URL (default: none, SQLite;
                            on this Redis 7 (README Cluster)  --db is then not used)
  --instance-id <id>        this instance's id in a cluster  RUNPLANE_INSTANCE_ID (default <hostname>-<pid>)
  --lease-ttl-ms <ms>       session lease lifetime; a dead   RUNPLANE_LEASE_TTL_MS (default 10000)
                            instance's sessions move after it
  --key-prefix <prefix>     prefix of every Redis key        RUNPLANE_KEY_PREFIX (default rp:)
  --failover-max-attempts <n>                                RUNPLANE_FAILOVER_MAX_ATTEMPTS (default 3)
                            attempts a run of a session with
                            failover resume gets in all
  --tokens <list>           Bearer tokens "token:owner,..."  RUNPLANE_TOKENS  (default: a dev token for
                            owner "dev", created once per database and printed at start)
  --grace-ms <ms>           shutdown grace for running runs  RUNPLANE_GRACE_MS (default 10000)
  --heartbeat-ms <ms>       SSE heartbeat comment interval   RUNPLANE_HEARTBEAT_MS (default 15000)
  --body-timeout-ms <ms>    time a request body may take     RUNPLANE_BODY_TIMEOUT_MS (default 30000)
  --max-streams <n>         open SSE streams per owner       RUNPLANE_MAX_STREAMS (default 128)
  --stream-buffer-bytes <n> unread bytes per SSE stream     RUNPLANE_STREAM_BUFFER_BYTES (default 262144)
  --event-tail-bytes <n>    event log memory tail, all       RUNPLANE_EVENT_TAIL_BYTES (default 8388608)
                            sessions together (bytes)
  --chunk-delay-ms <ms>     demo model pause per word        RUNPLANE_CHUNK_DELAY_MS (default 60)
  --confirm-tools <list>    demo tools that ask first        RUNPLANE_CONFIRM_TOOLS (default clock;
                            "none" for none; names: calculator, clock)
  --run-timeout-ms <ms>     total budget of each run         RUNPLANE_RUN_TIMEOUT_MS (default none)
  --retention-days <n>      delete sessions idle this long   RUNPLANE_RETENTION_DAYS (default none: keep)
  --max-sessions-per-owner <n>  sessions per owner         RUNPLANE_MAX_SESSIONS_PER_OWNER (default 10000)
  --max-running-runs-per-owner <n>  running runs per owner; more wait, owners take turns
                                                             RUNPLANE_MAX_RUNNING_RUNS_PER_OWNER (default 8)
  --max-unfinished-runs-per-owner <n>  runs not yet ended per owner (running or waiting)
                                                             RUNPLANE_MAX_UNFINISHED_RUNS_PER_OWNER (default 1000)
  --max-concurrent-runs <n> running runs, all owners        RUNPLANE_MAX_CONCURRENT_RUNS (default unlimited)
  --rate-limit <n>          requests per second per owner    RUNPLANE_RATE_LIMIT (default 50; 0: no limit)
  --rate-burst <n>          requests at once per owner       RUNPLANE_RATE_BURST (default 200)
  --approval-timeout-ms <ms> wait for a tool confirmation,   RUNPLANE_APPROVAL_TIMEOUT_MS (default 600000;
                            then denied (reason timeout)     a session's approval_timeout_ms wins)
  --max-request-tokens <n>  the agent's token budget per     RUNPLANE_MAX_REQUEST_TOKENS (default 24000;
                            model request                    older turns are summarized)
  --max-tool-result-tokens <n>  a tool result's share of     RUNPLANE_MAX_TOOL_RESULT_TOKENS (default 4000;
                            a request                        cut with a marker)
  --context-overflow <mode> older turns over the budget:     RUNPLANE_CONTEXT_OVERFLOW (default summary)
                            summary or drop
  --model-max-retries <n>   retries of a 429/5xx answer      RUNPLANE_MODEL_MAX_RETRIES (default 2)
  --metrics-token <token>   serve GET /metrics on this port, RUNPLANE_METRICS_TOKEN (default: /metrics off)
                            behind this bearer token
  --metrics-port <port>     serve GET /metrics on a port     RUNPLANE_METRICS_PORT (default: /metrics off)
                            of its own (with --metrics-token: behind it there too)
  --metrics-host <host>     interface of --metrics-port      RUNPLANE_METRICS_HOST (default 127.0.0.1)
  --log-format <format>     request and run-end lines: json, RUNPLANE_LOG_FORMAT (default json)
                            pretty (for a terminal) or none
  --log-level <level>       lowest level logged: fatal, error, RUNPLANE_LOG_LEVEL (default info)
                            warn, info, debug, trace, silent
  --traceparent <mode>      a request's traceparent is the   RUNPLANE_TRACEPARENT (default parent)
                            runs' parent, a link (our sampler
                            decides) or ignored: parent, link, ignore
  --openai-base-url <url>   use an OpenAI-compatible model   OPENAI_BASE_URL
  --model <name>            its model name                   RUNPLANE_MODEL   (required with a base URL)
                            its key comes from OPENAI_API_KEY (default "none", for local servers)
`;

/**
 * The line printed after a bad flag or variable, in place of the whole usage, so that the one
 * line naming the problem stays in sight (README "Quick start").
 */
export const helpHint = 'see `runplane --help` for every command, flag and environment variable\n';

/** The help text of `runplane serve`. */
export const serveUsage = `  serve           start the HTTP session-events service and its chat page

${serveOptionsUsage}`;

type Env = Readonly<Record<string, string | undefined>>;

const integerOf = (name: string, text: string | undefined, min: number, max: number) => {
  if (text === undefined) return undefined;
  const value = /^\d+$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`,
    );
  }
  return value;
};

const oneOf = <T extends string>(
  name: string,
  text: string | undefined,
  allowed: readonly T[],
): T | undefined => {
  if (text === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(text)) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be one of ${allowed.join(', ')}, got ${JSON.stringify(text)}`,
    );
  }
  return text as T;
};

/**
 * Turns `serve` arguments and environment variables into {@link ServeOptions}.
 *
 * @param args - the arguments after `serve`
 * @param env - the environment (`process.env`)
 * @returns the options
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the bad flag or variable
 * @throws `TypeError` (code `ERR_PARSE_ARGS_UNKNOWN_OPTION` and friends) from util.parseArgs
 *   for an unknown flag or a missing value
 */
export function parseServeArgs(args: readonly string[], env: Env): ServeOptions {
  const { values } = parseArgs({
    args: [...args],
    allowPositionals: false,
    strict: true,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      db: { type: 'string' },
      redis: { type: 'string' },
      'instance-id': { type: 'string' },
      'lease-ttl-ms': { type: 'string' },
      'failover-max-attempts': { type: 'string' },
      'key-prefix': { type: 'string' },
      tokens: { type: 'string' },
      'grace-ms': { type: 'string' },
      'heartbeat-ms': { type: 'string' },
      'body-timeout-ms': { type: 'string' },
      'max-streams': { type: 'string' },
      'event-tail-bytes': { type: 'string' },
      'stream-buffer-bytes': { type: 'string' },
      'chunk-delay-ms': { type: 'string' },
      'confirm-tools': { type: 'string' },
      'run-timeout-ms': { type: 'string' },
      'retention-days': { type: 'string' },
      'max-sessions-per-owner': { type: 'string' },
      'max-running-runs-per-owner': { type: 'string' },
      'max-unfinished-runs-per-owner': { type: 'string' },
      'max-concurrent-runs': { type: 'string' },
      'rate-limit': { type: 'string' },
      'rate-burst': { type: 'string' },
      'approval-timeout-ms': { type: 'string' },
      'max-request-tokens': { type: 'string' },
      'max-tool-result-tokens': { type: 'string' },
      'context-overflow': { type: 'string' },
      'model-max-retries': { type: 'string' },
      'metrics-token': { type: 'string' },
      'metrics-port': { type: 'string' },
      'metrics-host': { type: 'string' },
      'log-format': { type: 'string' },
      'log-level': { type: 'string' },
      traceparent: { type: 'string' },
      'openai-base-url': { type: 'string' },
      model: { type: 'string' },
    },
  });
  const pick = (flag: keyof typeof values, variable: string) => {
    const value = values[flag] ?? env[variable];
    return value === '' ? undefined : value;
  };
  // A number given empty is refused like any other bad value (an unset variable in a script,
  // say), never read as "use the default".
  const integer = (flag: keyof typeof values, variable: string, min: number, max: number) =>
    integerOf(flag, values[flag] ?? env[variable], min, max);
  // An empty token list is a misconfiguration (an unset secret, say), never "use the dev token".
  const tokenList = values.tokens ?? env.RUNPLANE_TOKENS;
  if (tokenList !== undefined && tokenList.trim() === '') {
    throw new InvalidArgumentError(
      'tokens',
      'expected `--tokens` or RUNPLANE_TOKENS to list token:owner pairs, got an empty value (leave it unset for the dev token)',
    );
  }
  const confirmText = pick('confirm-tools', 'RUNPLANE_CONFIRM_TOOLS');
  const confirmTools =
    confirmText === undefined
      ? undefined
      : confirmText.trim() === 'none'
        ? []
        : confirmText.split(',').map((name) => name.trim());
  const overflow = oneOf(
    'context-overflow',
    pick('context-overflow', 'RUNPLANE_CONTEXT_OVERFLOW'),
    ['summary', 'drop'] as const,
  );
  const logFormat = oneOf('log-format', pick('log-format', 'RUNPLANE_LOG_FORMAT'), logFormats);
  const logLevel = oneOf('log-level', pick('log-level', 'RUNPLANE_LOG_LEVEL'), logLevels);
  const traceparent = oneOf(
    'traceparent',
    pick('traceparent', 'RUNPLANE_TRACEPARENT'),
    traceparentModes,
  );
  const metricsToken = values['metrics-token'] ?? env.RUNPLANE_METRICS_TOKEN;
  if (metricsToken !== undefined && metricsToken.trim() === '') {
    throw new InvalidArgumentError(
      'metrics-token',
      'expected `--metrics-token` or RUNPLANE_METRICS_TOKEN to be a token, got an empty value (leave it unset for no /metrics)',
    );
  }
  const baseURL = pick('openai-base-url', 'OPENAI_BASE_URL');
  const model = pick('model', 'RUNPLANE_MODEL');
  if (baseURL !== undefined && model === undefined) {
    throw new InvalidArgumentError(
      'model',
      'expected `--model` or RUNPLANE_MODEL with an OpenAI base URL, got nothing',
    );
  }
  const redisUrl = pick('redis', 'RUNPLANE_REDIS_URL');
  if (redisUrl !== undefined) {
    // A URL without a host is refused: ioredis would take it to mean 127.0.0.1:6379.
    try {
      checkRedisUrl(redisUrl);
    } catch {
      throw new InvalidArgumentError(
        'redis',
        `expected \`--redis\` or RUNPLANE_REDIS_URL to be a redis://host:port/<db number> (or rediss://) URL, got ${JSON.stringify(redactRedisUrl(redisUrl))}`,
      );
    }
  }
  const clusterFlags = (
    ['instance-id', 'lease-ttl-ms', 'key-prefix', 'failover-max-attempts'] as const
  ).filter((flag) => values[flag] !== undefined);
  if (redisUrl === undefined && clusterFlags.length > 0) {
    throw new InvalidArgumentError(
      clusterFlags[0]!,
      `expected \`--${clusterFlags[0]!}\` only with \`--redis\` (a cluster instance), got no Redis URL`,
    );
  }
  return {
    redis:
      redisUrl === undefined
        ? undefined
        : {
            url: redisUrl,
            instanceId: pick('instance-id', 'RUNPLANE_INSTANCE_ID'),
            leaseTtlMs: integer('lease-ttl-ms', 'RUNPLANE_LEASE_TTL_MS', 30, 3_600_000),
            keyPrefix: pick('key-prefix', 'RUNPLANE_KEY_PREFIX'),
            failoverMaxAttempts: integer(
              'failover-max-attempts',
              'RUNPLANE_FAILOVER_MAX_ATTEMPTS',
              1,
              100,
            ),
          },
    host: pick('host', 'RUNPLANE_HOST'),
    port: integer('port', 'RUNPLANE_PORT', 0, 65_535),
    dbPath: pick('db', 'RUNPLANE_DB'),
    tokens: pick('tokens', 'RUNPLANE_TOKENS'),
    graceMs: integer('grace-ms', 'RUNPLANE_GRACE_MS', 0, 3_600_000),
    heartbeatMs: integer('heartbeat-ms', 'RUNPLANE_HEARTBEAT_MS', 1, 3_600_000),
    bodyTimeoutMs: integer('body-timeout-ms', 'RUNPLANE_BODY_TIMEOUT_MS', 1, 3_600_000),
    maxStreamsPerOwner: integer('max-streams', 'RUNPLANE_MAX_STREAMS', 1, 100_000),
    streamBufferBytes: integer(
      'stream-buffer-bytes',
      'RUNPLANE_STREAM_BUFFER_BYTES',
      1,
      1_073_741_824,
    ),
    eventTailBytes: integer('event-tail-bytes', 'RUNPLANE_EVENT_TAIL_BYTES', 0, 4_294_967_296),
    chunkDelayMs: integer('chunk-delay-ms', 'RUNPLANE_CHUNK_DELAY_MS', 0, 60_000),
    confirmTools,
    runTimeoutMs: integer('run-timeout-ms', 'RUNPLANE_RUN_TIMEOUT_MS', 1, 86_400_000),
    retentionDays: integer('retention-days', 'RUNPLANE_RETENTION_DAYS', 1, 36_500),
    maxSessionsPerOwner: integer(
      'max-sessions-per-owner',
      'RUNPLANE_MAX_SESSIONS_PER_OWNER',
      1,
      100_000_000,
    ),
    maxRunningRunsPerOwner: integer(
      'max-running-runs-per-owner',
      'RUNPLANE_MAX_RUNNING_RUNS_PER_OWNER',
      1,
      1_000_000,
    ),
    maxUnfinishedRunsPerOwner: integer(
      'max-unfinished-runs-per-owner',
      'RUNPLANE_MAX_UNFINISHED_RUNS_PER_OWNER',
      1,
      1_000_000,
    ),
    maxConcurrentRuns: integer('max-concurrent-runs', 'RUNPLANE_MAX_CONCURRENT_RUNS', 1, 1_000_000),
    rateLimitPerSecond: integer('rate-limit', 'RUNPLANE_RATE_LIMIT', 0, 1_000_000),
    rateLimitBurst: integer('rate-burst', 'RUNPLANE_RATE_BURST', 1, 1_000_000),
    approvalTimeoutMs: integer(
      'approval-timeout-ms',
      'RUNPLANE_APPROVAL_TIMEOUT_MS',
      1,
      86_400_000,
    ),
    maxRequestTokens: integer('max-request-tokens', 'RUNPLANE_MAX_REQUEST_TOKENS', 100, 10_000_000),
    maxToolResultTokens: integer(
      'max-tool-result-tokens',
      'RUNPLANE_MAX_TOOL_RESULT_TOKENS',
      10,
      10_000_000,
    ),
    contextOverflow: overflow,
    modelMaxRetries: integer('model-max-retries', 'RUNPLANE_MODEL_MAX_RETRIES', 0, 10),
    metricsToken,
    metricsPort: integer('metrics-port', 'RUNPLANE_METRICS_PORT', 0, 65_535),
    metricsHost: pick('metrics-host', 'RUNPLANE_METRICS_HOST'),
    logFormat,
    logLevel,
    traceparent,
    openai:
      baseURL === undefined || model === undefined
        ? undefined
        : { baseURL, model, apiKey: env.OPENAI_API_KEY || 'none' },
  };
}

/**
 * Runs `runplane serve` until SIGTERM or SIGINT.
 *
 * @param args - the arguments after `serve`
 * @param env - the environment @default process.env
 * @returns the exit code: 0 after a drained shutdown, 1 when runs had to be cancelled, 2 for a
 *   bad flag or variable (the problem and a one-line pointer to `--help` are printed to stderr)
 */
export async function runServeCommand(
  args: readonly string[],
  env: Env = process.env,
): Promise<number> {
  let options: ServeOptions;
  try {
    options = parseServeArgs(args, env);
  } catch (error) {
    process.stderr.write(
      `runplane serve: ${error instanceof Error ? error.message : String(error)}\n${helpHint}`,
    );
    return 2;
  }
  // Signals are caught from before the server starts: a SIGTERM sent as soon as "listening on"
  // is read must never find Node's default action (exit at once) in place.
  let early: NodeJS.Signals | undefined;
  const onEarlySignal = (signal: NodeJS.Signals) => (early ??= signal);
  process.on('SIGTERM', onEarlySignal);
  process.on('SIGINT', onEarlySignal);
  let server;
  try {
    // The command logs JSON lines unless told otherwise; `startServer` alone logs none.
    server = await startServer({ ...options, logFormat: options.logFormat ?? 'json' });
  } catch (error) {
    process.off('SIGTERM', onEarlySignal);
    process.off('SIGINT', onEarlySignal);
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`runplane serve: ${message}\n`);
    return error instanceof RunplaneError && error.code === 'INVALID_ARGUMENT' ? 2 : 1;
  }
  const stopped = serveUntilSignal(server, { graceMs: options.graceMs, signalled: early });
  process.off('SIGTERM', onEarlySignal);
  process.off('SIGINT', onEarlySignal);
  return stopped;
}

/**
 * A safe arithmetic evaluator for the demo agent's calculator tool: a recursive-descent
 * parser over numbers, operators and a few functions. Nothing is ever passed to `eval`.
 *
 * @module
 */
import { InvalidArgumentError } from '../errors.js';

/** The longest expression accepted, in characters. */
export const maxExpressionLength = 500;
const maxDepth = 64;

const functions: Readonly<Record<string, (x: number) => number>> = {
  sqrt: Math.sqrt,
  abs: Math.abs,
  round: Math.round,
  floor: Math.floor,
  ceil: Math.ceil,
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
  ln: Math.log,
  log: Math.log10,
  exp: Math.exp,
};
const constants: Readonly<Record<string, number>> = { pi: Math.PI, e: Math.E };

type Token =
  | { kind: 'number'; value: number; at: number }
  | { kind: 'name'; value: string; at: number }
  | { kind: 'op'; value: string; at: number };

const fail = (message: string): never => {
  throw new InvalidArgumentError('expression', `expected \`expression\` to be ${message}`);
};

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const ch = source[i] ?? '';
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    const number = /^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?/.exec(source.slice(i));
    if (number !== null) {
      tokens.push({ kind: 'number', value: Number(number[0]), at: i });
      i += number[0].length;
      continue;
    }
    const name = /^[A-Za-z]+/.exec(source.slice(i));
    if (name !== null) {
      tokens.push({ kind: 'name', value: name[0].toLowerCase(), at: i });
      i += name[0].length;
      continue;
    }
    if (source.startsWith('**', i)) {
      tokens.push({ kind: 'op', value: '^', at: i });
      i += 2;
      continue;
    }
    if ('+-*/%^()×÷−'.includes(ch)) {
      const value = ch === '×' ? '*' : ch === '÷' ? '/' : ch === '−' ? '-' : ch;
      tokens.push({ kind: 'op', value, at: i });
      i++;
      continue;
    }
    fail(`arithmetic, got the character ${JSON.stringify(ch)} at position ${i + 1}`);
  }
  return tokens;
}

/**
 * Evaluates an arithmetic expression.
 *
 * @remarks Grammar: numbers (`12`, `3.5`, `1e3`), `+ - * / % ^` (`**` is `^`, right
 * associative; `×`, `÷` and `−` are accepted), parentheses, unary `+`/`-`, the constants `pi`
 * and `e`, and the functions `sqrt abs round floor ceil sin cos tan ln log exp` applied to a
 * parenthesized argument. Division by zero, a non-finite result, more than
 * {@link maxExpressionLength} characters or 64 levels of nesting are errors.
 *
 * @param expression - the expression, e.g. `"(2 + 3) * 4^2"`
 * @returns the value
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`, field `expression`) naming what is
 *   wrong and where
 * @example
 * ```ts
 * evaluateArithmetic('6 * 7'); // 42
 * ```
 */
export function evaluateArithmetic(expression: string): number {
  if (typeof expression !== 'string' || expression.trim() === '') {
    fail('a non-empty string');
  }
  if (expression.length > maxExpressionLength) {
    fail(`at most ${maxExpressionLength} characters, got ${expression.length}`);
  }
  const tokens = tokenize(expression);
  let pos = 0;
  let depth = 0;
  const peek = () => tokens[pos];
  const describe = (token: Token | undefined) =>
    token === undefined
      ? 'the end'
      : `${JSON.stringify(String(token.value))} at position ${token.at + 1}`;
  const expectOp = (value: string) => {
    const token = peek();
    if (token?.kind !== 'op' || token.value !== value)
      fail(`well formed: expected "${value}", got ${describe(token)}`);
    pos++;
  };
  const nested = <T>(fn: () => T): T => {
    if (++depth > maxDepth) fail(`nested at most ${maxDepth} levels deep`);
    try {
      return fn();
    } finally {
      depth--;
    }
  };

  // sum := product (('+' | '-') product)*
  const sum = (): number => {
    let value = product();
    for (
      let token = peek();
      token?.kind === 'op' && (token.value === '+' || token.value === '-');
      token = peek()
    ) {
      pos++;
      const right = product();
      value = token.value === '+' ? value + right : value - right;
    }
    return value;
  };
  // product := unary (('*' | '/' | '%') unary)*
  const product = (): number => {
    let value = unary();
    for (
      let token = peek();
      token?.kind === 'op' && (token.value === '*' || token.value === '/' || token.value === '%');
      token = peek()
    ) {
      pos++;
      const right = unary();
      if ((token.value === '/' || token.value === '%') && right === 0)
        fail('free of division by zero');
      value =
        token.value === '*' ? value * right : token.value === '/' ? value / right : value % right;
    }
    return value;
  };
  // unary := ('+' | '-') unary | power
  const unary = (): number => {
    const token = peek();
    if (token?.kind === 'op' && (token.value === '-' || token.value === '+')) {
      pos++;
      const value = nested(unary);
      return token.value === '-' ? -value : value;
    }
    return power();
  };
  // power := atom ('^' unary)?   (right associative: 2^3^2 = 2^9)
  const power = (): number => {
    const base = atom();
    const token = peek();
    if (token?.kind === 'op' && token.value === '^') {
      pos++;
      return base ** nested(unary);
    }
    return base;
  };
  // atom := number | constant | function '(' sum ')' | '(' sum ')'
  const atom = (): number => {
    const token = peek();
    if (token === undefined) return fail('complete: it ends where a number was expected');
    if (token.kind === 'number') {
      pos++;
      return token.value;
    }
    if (token.kind === 'name') {
      pos++;
      const constant = constants[token.value];
      if (constant !== undefined) return constant;
      const fn = functions[token.value];
      if (fn === undefined) return fail(`arithmetic, got the unknown name ${describe(token)}`);
      expectOp('(');
      const argument = nested(sum);
      expectOp(')');
      return fn(argument);
    }
    if (token.value === '(') {
      pos++;
      const value = nested(sum);
      expectOp(')');
      return value;
    }
    return fail(`well formed: expected a number, got ${describe(token)}`);
  };

  const value = sum();
  if (pos < tokens.length) fail(`well formed: unexpected ${describe(peek())}`);
  if (!Number.isFinite(value)) fail(`an expression with a finite value, got ${String(value)}`);
  return value;
}

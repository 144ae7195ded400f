import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'node_modules/',
      'visualizations/',
      'coverage/',
      'scratch/',
      'test-artifacts/',
      // npm run mutate: Stryker's sandbox and report.
      '.stryker-tmp/',
      'reports/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    // machines/ are pure statecharts: no I/O, no Node APIs, nothing from src/.
    files: ['machines/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'http', 'net', 'child_process', 'os', 'crypto'],
              message: 'machines/ must stay free of Node APIs and I/O.',
            },
            {
              group: ['../src/*', '../src', '**/src/**'],
              message: 'machines/ must not import from src/.',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        'process',
        'setTimeout',
        'setInterval',
        'Date',
        'fetch',
        'console',
      ],
    },
  },
  {
    // Test agents are often `async` without awaiting: that is the point of them.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/require-await': 'off' },
  },
  {
    files: ['eslint.config.js', 'stryker.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);

/** Jest runs the TypeScript sources through ts-jest against the backend picked in test-backend/. */
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: '<rootDir>/test-backend/jest-environment.ts',
  roots: ['<rootDir>/__tests__'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: { warnOnly: false } }] },
  globalSetup: '<rootDir>/test-backend/jest-global-setup.ts',
  globalTeardown: '<rootDir>/test-backend/jest-global-teardown.ts',
  setupFiles: ['<rootDir>/test-backend/jest-setup.ts'],
  testTimeout: 30000,
  // Two by default (the machine this project grew on has two cores); CI's whole-suite lane sets
  // MPL_JEST_WORKERS=3, since most of a test's time is waiting (timers, fail points, the emulator).
  maxWorkers: Number(process.env.MPL_JEST_WORKERS) || 2,
};

/**
 * Jest's node environment, plus one duty at the end of every test file: giving back the fail-point
 * lock if the file took it (__tests__/support/fail-point-lock.ts). Done here rather than in an
 * afterAll hook because the environment's teardown runs after every hook of the file, including
 * those that turn a fail point off: releasing earlier would let another file configure the
 * fail point and this file's last `mode: 'off'` would then switch that one off. Likewise it stops
 * the file's private server, if it started one (__tests__/support/private-server.ts).
 */
import { TestEnvironment } from 'jest-environment-node';
import { releaseFailPointLock } from '../__tests__/support/fail-point-lock';
import { stopPrivateServer } from '../__tests__/support/private-server';

export default class LockingNodeEnvironment extends TestEnvironment {
  override async teardown(): Promise<void> {
    releaseFailPointLock();
    stopPrivateServer();
    await super.teardown();
  }
}

/**
 * Turns an owner (usually a session id) into the value stored in the lock collection.
 * Hashing keeps session ids out of the database: whoever reads the lock collection learns
 * nothing they could replay. With a secret (HMAC) even a guessed owner cannot be confirmed.
 */
import { createHash, createHmac } from 'node:crypto';
import type { ResolvedLockOptions } from './options';

export type OwnerKey = (owner: string) => string;

export function ownerKeyFunction(options: Pick<ResolvedLockOptions, 'ownerStorage' | 'ownerSecret'>): OwnerKey {
  if (options.ownerStorage === 'plain') return (owner) => owner;
  const secret = options.ownerSecret;
  if (secret) return (owner) => createHmac('sha256', secret).update(owner, 'utf8').digest('base64url');
  return (owner) => createHash('sha256').update(owner, 'utf8').digest('base64url');
}

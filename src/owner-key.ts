/**
 * Turns an owner (usually a session id) into the value stored in the lock collection.
 * Hashing keeps session ids out of the database: whoever reads the lock collection learns
 * nothing they could replay. With a secret (HMAC) even a guessed owner cannot be confirmed.
 */
import * as crypto from 'node:crypto';
import type { ResolvedLockOptions } from './options';

export type OwnerKey = (owner: string) => string;

/**
 * Node's one-shot `crypto.hash()` (Node 20.12 / 21.7 and newer; a string is hashed as UTF-8): the
 * same digest as createHash().update().digest() without building a Hash object per call. Older
 * Node versions (the package supports 18.18) use createHash.
 */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'base64url') => string }).hash;

export function ownerKeyFunction(options: Pick<ResolvedLockOptions, 'ownerStorage' | 'ownerSecret'>): OwnerKey {
  if (options.ownerStorage === 'plain') return (owner) => owner;
  const secret = options.ownerSecret;
  if (secret) return (owner) => crypto.createHmac('sha256', secret).update(owner, 'utf8').digest('base64url');
  if (oneShot) return (owner) => oneShot('sha256', owner, 'base64url');
  return (owner) => crypto.createHash('sha256').update(owner, 'utf8').digest('base64url');
}

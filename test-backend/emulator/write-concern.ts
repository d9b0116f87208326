/**
 * What the emulator can say about a write concern: it has one data-bearing node.
 *
 *  - Replica set, `w` a number above 1: the write is applied and the reply carries a
 *    writeConcernError UnsatisfiableWriteConcern (100) "Not enough data-bearing nodes" with errInfo
 *    `{ writeConcern: { w, wtimeout, provenance: 'clientSupplied' } }` (ReplSetConfig's
 *    write-concern check, src/mongo/db/repl/repl_set_config.cpp; the errInfo shape as the driver
 *    specifications' failCommand examples show it). `w: 0/1/'majority'` are satisfied.
 *  - A tag-set mode name other than 'majority', or `w` above 1 on a standalone: mongod's answer is
 *    not sourced here, so the command is refused (NotImplemented) before it runs.
 */
import type { Document } from 'bson';
import type { Topology } from './context';
import { unsupported } from './errors';
import { WRITE_CONCERN_COMMANDS } from './failpoints';

function requested(cmd: Document, name: string): Document | undefined {
  if (!WRITE_CONCERN_COMMANDS.has(name)) return undefined;
  const wc = cmd.writeConcern as Document | undefined;
  return wc && typeof wc === 'object' ? wc : undefined;
}

/** Refuses write concerns the emulator cannot answer as mongod would (call before running the command). */
export function checkWriteConcern(cmd: Document, name: string, topology: Topology): void {
  const wc = requested(cmd, name);
  if (!wc || wc.w === undefined) return;
  if (typeof wc.w === 'string' && wc.w !== 'majority') throw unsupported(`write concern mode '${wc.w}' (tag sets)`);
  if (typeof wc.w === 'number' && wc.w > 1 && topology === 'standalone') throw unsupported(`write concern w: ${wc.w} on a standalone`);
}

/** Adds the writeConcernError a one-node replica set answers for `w` above 1. */
export function withWriteConcernOutcome(cmd: Document, name: string, topology: Topology, reply: Document): Document {
  const wc = requested(cmd, name);
  if (!wc || topology !== 'replset' || typeof wc.w !== 'number' || wc.w <= 1 || reply.writeConcernError) return reply;
  return {
    ...reply,
    writeConcernError: {
      code: 100,
      codeName: 'UnsatisfiableWriteConcern',
      errmsg: 'Not enough data-bearing nodes',
      errInfo: { writeConcern: { w: wc.w, wtimeout: wc.wtimeout ?? 0, provenance: 'clientSupplied' } },
    },
  };
}

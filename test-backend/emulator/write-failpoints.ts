/**
 * Two more of mongod's test fail points, the ones the driver specification suites use besides
 * failCommand:
 *
 *  - onPrimaryTransactionalWrite (src/mongo/db/transaction/transaction_participant.cpp): "Failpoint
 *    which allows different failure actions to happen after each write. closeConnection (bool,
 *    default = true): Closes the connection on which the write was executed.
 *    failBeforeCommitExceptionCode (int, default = not specified): If set, the specified exception
 *    code will be thrown, which will cause the write to not commit; if not specified, the write will
 *    be allowed to commit." It acts on retryable writes (lsid + txnNumber outside a transaction).
 *    The emulator applies it per command: the write commits and the connection closes before the
 *    reply (the retry then gets the recorded outcome), or, with failBeforeCommitExceptionCode, the
 *    connection closes and nothing is written. `closeConnection: false` together with
 *    failBeforeCommitExceptionCode would make mongod answer an errmsg the emulator has no source for,
 *    so it is refused at configure time.
 *  - failGetMoreAfterCursorCheckout (src/mongo/db/commands/getmore_cmd.cpp, re-read; defined in
 *    src/mongo/db/query/find_common.cpp): a getMore fails with `data.errorCode` (InternalError when
 *    omitted) and "Hit the 'failGetMoreAfterCursorCheckout' failpoint" once its cursor is checked
 *    out. On a change stream mongod labels resumable codes ResumableChangeStreamError (the codes
 *    listed by the change-streams spec test change-streams-resume-errorLabels.json).
 *
 * Both use the same mode semantics as failCommand (times, skip, alwaysOn, off, activationProbability).
 */
import type { Document } from 'bson';
import { MongoCommandError } from './errors';
import { codeNameOf } from './failpoints';

const FailPointSetFailed = 266;

/** Codes the change-streams spec test change-streams-resume-errorLabels.json expects mongod to label ResumableChangeStreamError. */
const RESUMABLE_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 63, 150, 234, 133]);

type Mode = { kind: 'off' } | { kind: 'alwaysOn' } | { kind: 'times'; remaining: number } | { kind: 'skip'; toSkip: number };

function parseMode(mode: unknown): Mode {
  if (mode === 'off') return { kind: 'off' };
  if (mode === 'alwaysOn') return { kind: 'alwaysOn' };
  if (mode && typeof mode === 'object') {
    const m = mode as Document;
    if (typeof m.times === 'number') return { kind: 'times', remaining: m.times };
    if (typeof m.skip === 'number') return { kind: 'skip', toSkip: m.skip };
  }
  throw new MongoCommandError(2, `unsupported mode ${JSON.stringify(mode)} for this fail point in the mongoose-pessimistic-lock emulator`);
}

class Activation {
  mode: Mode = { kind: 'off' };
  data: Document = {};

  fire(): boolean {
    const m = this.mode;
    switch (m.kind) {
      case 'off':
        return false;
      case 'alwaysOn':
        return true;
      case 'times':
        if (m.remaining <= 0) return false;
        m.remaining--;
        if (m.remaining === 0) this.mode = { kind: 'off' };
        return true;
      case 'skip':
        if (m.toSkip > 0) {
          m.toSkip--;
          return false;
        }
        return true;
    }
  }
}

export type WriteFailPointAction = { kind: 'closeAfterWrite' } | { kind: 'closeWithoutWrite' };

export class WriteFailPoints {
  private readonly onWrite = new Activation();
  private readonly onGetMore = new Activation();

  static handles(name: string): boolean {
    return name === 'onPrimaryTransactionalWrite' || name === 'failGetMoreAfterCursorCheckout';
  }

  configure(name: string, cmd: Document): Document {
    const mode = parseMode(cmd.mode);
    const data = (cmd.data ?? {}) as Document;
    if (name === 'onPrimaryTransactionalWrite') {
      const close = data.closeConnection === undefined ? true : !!data.closeConnection;
      if (!close && data.failBeforeCommitExceptionCode !== undefined) {
        throw new MongoCommandError(FailPointSetFailed, 'onPrimaryTransactionalWrite with closeConnection: false and failBeforeCommitExceptionCode is not supported by the mongoose-pessimistic-lock emulator', {}, 'FailPointSetFailed');
      }
      this.onWrite.mode = mode;
      this.onWrite.data = data;
    } else {
      if (data.closeConnection) throw new MongoCommandError(FailPointSetFailed, 'failGetMoreAfterCursorCheckout with closeConnection: true is not supported by the mongoose-pessimistic-lock emulator', {}, 'FailPointSetFailed');
      if (mode.kind !== 'off' && data.errorCode !== undefined && typeof data.errorCode !== 'number') throw new MongoCommandError(FailPointSetFailed, 'failGetMoreAfterCursorCheckout with a non-numeric data.errorCode is not supported by the mongoose-pessimistic-lock emulator', {}, 'FailPointSetFailed');
      // mongod activates it through shouldActivateFailCommandFailPoint (appName, namespace,
      // threadName, failInternalCommands...), which this fail point does not reproduce.
      const filters = ['appName', 'namespace', 'threadName', 'failInternalCommands', 'failLocalClients', 'failAllCommands'].filter((f) => f in data);
      if (mode.kind !== 'off' && filters.length) throw new MongoCommandError(FailPointSetFailed, `failGetMoreAfterCursorCheckout with ${filters.join(', ')} is not supported by the mongoose-pessimistic-lock emulator`, {}, 'FailPointSetFailed');
      this.onGetMore.mode = mode;
      this.onGetMore.data = data;
    }
    return { count: 0, ok: 1 };
  }

  /** For a retryable write about to run: what the fail point does to it, if it fires. */
  onRetryableWrite(): WriteFailPointAction | undefined {
    if (!this.onWrite.fire()) return undefined;
    const d = this.onWrite.data;
    if (d.failBeforeCommitExceptionCode !== undefined) return { kind: 'closeWithoutWrite' };
    return { kind: 'closeAfterWrite' };
  }

  /** Called once a getMore has checked out its cursor; throws the configured error when it fires. */
  afterGetMoreCheckout(isChangeStream: boolean): void {
    if (!this.onGetMore.fire()) return;
    // getmore_cmd.cpp: uasserted(errorCode, "Hit the 'failGetMoreAfterCursorCheckout' failpoint"),
    // InternalError (1) when data.errorCode is omitted.
    const code = this.onGetMore.data.errorCode === undefined ? 1 : Number(this.onGetMore.data.errorCode);
    const extra: Document = {};
    if (isChangeStream && RESUMABLE_CODES.has(code)) extra.errorLabels = ['ResumableChangeStreamError'];
    throw new MongoCommandError(code, "Hit the 'failGetMoreAfterCursorCheckout' failpoint", extra, codeNameOf(code));
  }
}

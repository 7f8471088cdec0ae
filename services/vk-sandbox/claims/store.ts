// The claims table's one door: load it once at startup, then commit. Behind it are the codec (codec.ts), the
// group commit that lets concurrent commits share one write (group-commit.ts) and the durable file (file.ts); the
// provider keeps only its in-memory maps and says, through `source`, what a write contains.
import { type DecodedTable, TableEncoder } from "./codec.ts";
import type { ClaimsFile } from "./file.ts";
import { GroupCommit } from "./group-commit.ts";
import type { TableSnapshot } from "./schema.ts";

/**
 * What one write persists. Called synchronously when a batch starts, with the tags (claim ids) of the commits
 * that batch serves; `landed` runs once the write is on disk, before the next batch takes its snapshot.
 */
export type TableSource = (included: ReadonlySet<string>) => { table: TableSnapshot; landed(): void };

export class ClaimsStore {
  private readonly commits = new GroupCommit<string>((included) => this.writeBatch(included));
  private source: TableSource | undefined;
  /** Reuses the bytes of unchanged runs of rows from one write to the next (codec.ts). */
  private readonly encoder = new TableEncoder();

  constructor(private readonly file: ClaimsFile) {}

  /** The file's path, for log lines and errors. */
  get path(): string {
    return this.file.path;
  }

  /** Writes started so far (tests and benchmarks). */
  get writes(): number {
    return this.commits.writes;
  }

  /** Missing file = empty table; an unreadable or malformed one rejects with ClaimsStateError (fatal at startup). */
  load(now: number): Promise<DecodedTable> {
    return this.file.load(now);
  }

  /** Sets what every later write persists (the provider's state, once). */
  setSource(source: TableSource): void {
    this.source = source;
  }

  /**
   * Resolves once a write that started after this call has landed (so it contains everything changed before the
   * call); rejects with ClaimsStateError("unwritable"). `tag` names a row the write must include even while the
   * source still holds it back (a fresh claim being committed). Concurrent commits share writes.
   */
  commit(tag?: string): Promise<void> {
    return this.commits.commit(tag);
  }

  /** Resolves when no write is pending or running. */
  idle(): Promise<void> {
    return this.commits.idle();
  }

  private async writeBatch(included: ReadonlySet<string>): Promise<void> {
    if (!this.source) throw new Error("claims store: commit before a source was set");
    // Snapshot and encode synchronously: nothing can change the table between these lines.
    const { table, landed } = this.source(included);
    await this.file.write(this.encoder.encode(table));
    landed();
  }
}

// Stands for a slow disk sync: the app's `beforeDurable` hook (awaited before a commit is made
// durable, src/db/durable-commit.ts) holds the next commit that reaches it until the test lets it go.

export interface HeldSync {
  /** Resolves when a commit has been made (visible) and waits for its held sync. */
  entered: Promise<void>;
  /** Lets that sync finish. */
  release: () => void;
}

export function durableGate() {
  let armed: { entered: () => void; release: Promise<void> } | null = null;
  return {
    /** Pass as `beforeDurable` when starting the test app. */
    beforeDurable: async (): Promise<void> => {
      const g = armed;
      armed = null;
      if (!g) return;
      g.entered();
      await g.release;
    },
    /** Holds the next commit's sync. */
    hold(): HeldSync {
      let entered!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((r) => (entered = r));
      armed = { entered, release: new Promise<void>((r) => (release = r)) };
      return { entered: reached, release };
    },
  };
}

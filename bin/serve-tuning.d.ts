// Types of bin/serve-tuning.js (plain JavaScript: bin/cubby.js loads it before any TypeScript can run).
export const INTERRUPT_BUDGET: number;
export function tuneForServing(env?: NodeJS.ProcessEnv | Record<string, string>, execArgv?: string[]): void;

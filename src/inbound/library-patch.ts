/**
 * A patch of a library's internals (src/inbound/parse-mime.ts, src/inbound/mailauth-patches.ts),
 * made at most once: `apply` checks what it replaces and returns true once it has patched it; false
 * or a throw leaves the library as it is ('unavailable', e.g. another version). Every later call
 * gets the first answer.
 */
export function patchOnce(apply: () => boolean): () => 'patched' | 'unavailable' {
  let state: 'patched' | 'unavailable' | undefined;
  return () => {
    if (state) return state;
    state = 'unavailable';
    try {
      if (apply()) state = 'patched';
    } catch {
      state = 'unavailable';
    }
    return state;
  };
}

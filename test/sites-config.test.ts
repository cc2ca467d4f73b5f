import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';

// Sites run anyone's scripts, so their host must never share cookies with the dashboard's:
// CUBBY_SITES_HOST may neither contain the dashboard's host nor sit under it.

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  return [];
}

describe('CUBBY_SITES_HOST against the dashboard host', () => {
  it('refuses a sites host that equals, contains or sits under the dashboard host', () => {
    for (const [sites, dashboard] of [
      ['cubby.example.com', 'https://cubby.example.com'],
      ['example.com', 'https://app.example.com'],
      ['sites.cubby.example.com', 'https://cubby.example.com/'],
      ['cubby.example.com:8443', 'https://cubby.example.com:9443'],
    ]) {
      const problems = problemsOf({ CUBBY_SITES_HOST: sites!, CUBBY_PUBLIC_URL: dashboard! });
      expect(problems.join('\n'), `${sites} / ${dashboard}`).toMatch(/^CUBBY_SITES_HOST: must not contain or sit under/m);
    }
  });

  it('accepts a domain of its own, or no public URL at all', () => {
    expect(problemsOf({ CUBBY_SITES_HOST: 'cubby-sites.net', CUBBY_PUBLIC_URL: 'https://cubby.example.com' })).toEqual([]);
    expect(problemsOf({ CUBBY_SITES_HOST: 'usercontent.example.net', CUBBY_PUBLIC_URL: 'https://example.com' })).toEqual([]);
    expect(problemsOf({ CUBBY_SITES_HOST: '0.0.1:8081' })).toEqual([]);
  });
});

import pino from 'pino';

// Secrets never reach logs: credentials, cookies and password fields are redacted.
export function createLogger(level: string) {
  return pino({
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'headers.authorization',
        'headers.cookie',
        '*.password',
        '*.api_key',
        '*.token',
        '*.signing_secret',
      ],
      censor: '[redacted]',
    },
  });
}

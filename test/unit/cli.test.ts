import { expect, test } from 'vitest';
import { COMMANDS, main } from '../../src/cli.js';
import { useCommandOutput } from '../support/cli.js';

const { out, err } = useCommandOutput();

test('no command prints the help and fails; help and --help succeed', async () => {
  expect(await main([])).toBe(1);
  expect(out.join('')).toContain('Usage: tradegate <command> [options]');
  expect(await main(['--help'])).toBe(0);
  for (const name of Object.keys(COMMANDS)) expect(out.join('')).toContain(`  ${name}`);
});

test('an unknown command exits 2 with the help on stderr', async () => {
  expect(await main(['launch'])).toBe(2);
  expect(err.join('')).toMatch(/^tradegate: unknown command 'launch'/);
});

test('<command> --help prints that command’s usage without running it; a command taking --cluster also names the NATS login settings (cluster re-probe: none were listed)', async () => {
  expect(await main(['sim', '--help'])).toBe(0);
  expect(out.join('')).toBe(`${COMMANDS.sim!.summary}\n\nUsage: ${COMMANDS.sim!.usage}\n`);
  out.length = 0;
  expect(await main(['serve', '--help'])).toBe(0);
  const text = out.join('');
  expect(text.startsWith(`${COMMANDS.serve!.summary}\n\nUsage: ${COMMANDS.serve!.usage}\n`)).toBe(true);
  for (const name of ['NATS_USER', 'NATS_PASSWORD_FILE', 'NATS_TOKEN', 'NATS_NKEY', 'NATS_CA', 'NATS_CERT', 'NATS_KEY']) expect(text).toContain(name);
});

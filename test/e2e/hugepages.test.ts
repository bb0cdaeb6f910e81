/**
 * Huge pages for the model's memory (issue 38): the launcher's decision as pure functions, then the
 * real bin/cutout with CUTOUT_HUGEPAGES=0, the default and CUTOUT_HUGEPAGES=1 (which starts node
 * again with glibc's tunable where the system allows it), each saying what is in force.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { decideHugePages, glibcHasTunable, hugetlbTunable, inForce, parseSetting, parseThpMode, processFacts, HUGE_PAGES_DEFAULT, type HugePagesFacts, type ThpMode } from '../../src/launcher/hugepages.js';
import { FIXTURES, runCli } from '../helpers/cli.js';
import { startListening } from '../helpers/process.js';

/** Facts of a glibc 2.36 Linux with THP `madvise`, each overridable; the thunks count their reads. */
function facts(over: Partial<Omit<HugePagesFacts, 'thp' | 'glibc'>> & { thp?: ThpMode | null; glibc?: string | null } = {}): HugePagesFacts & { reads: string[] } {
  const reads: string[] = [];
  const thp = over.thp === undefined ? 'madvise' : over.thp;
  const glibc = over.glibc === undefined ? '2.36' : over.glibc;
  return {
    platform: over.platform ?? 'linux', setting: over.setting, tunables: over.tunables,
    thp: () => (reads.push('thp'), thp),
    glibc: () => (reads.push('glibc'), glibc),
    reads,
  };
}

t.test('the decision', async (t) => {
  const on = decideHugePages(facts({ setting: '1' }));
  t.same([on.relaunch, on.inForce, on.tunables], [true, true, 'glibc.malloc.hugetlb=1'], 'CUTOUT_HUGEPAGES=1 on glibc 2.36 with THP madvise: relaunch with the tunable');
  const kept = decideHugePages(facts({ setting: '1', tunables: 'glibc.malloc.arena_max=2' }));
  t.equal(kept.tunables, 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1', 'tunables already set are kept');

  const optOut = facts({ setting: '0' });
  t.same([decideHugePages(optOut).relaunch, decideHugePages(optOut).inForce], [false, false], 'CUTOUT_HUGEPAGES=0: off');
  t.same(optOut.reads, [], 'the opt-out reads nothing from the system');
  const mac = facts({ setting: '1', platform: 'darwin' });
  t.same([decideHugePages(mac).relaunch, decideHugePages(mac).reason], [false, 'not Linux (darwin)'], 'macOS: nothing');
  t.same(mac.reads, [], 'and reads nothing');
  const byDefault = facts();
  t.equal(decideHugePages(byDefault).relaunch, HUGE_PAGES_DEFAULT, 'unset: the default');
  if (!HUGE_PAGES_DEFAULT) t.same(byDefault.reads, [], 'off by default costs no read');

  const never = facts({ setting: '1', thp: 'never' });
  t.same([decideHugePages(never).relaunch, decideHugePages(never).reason], [false, 'transparent huge pages are `never` on this system'], 'THP never: no relaunch');
  const noThp = facts({ setting: '1', thp: null });
  t.equal(decideHugePages(noThp).relaunch, false, 'no THP in the kernel: no relaunch');
  const musl = facts({ setting: '1', glibc: null });
  t.same([decideHugePages(musl).relaunch, decideHugePages(musl).reason], [false, 'the C library is not glibc'], 'musl: no relaunch');
  const old = facts({ setting: '1', glibc: '2.31' });
  t.match(decideHugePages(old).reason, /glibc 2\.31 has no glibc\.malloc\.hugetlb/, 'glibc before 2.35: no relaunch');
  const always = facts({ setting: '1', thp: 'always' });
  const alwaysDecision = decideHugePages(always);
  t.same([alwaysDecision.relaunch, alwaysDecision.inForce], [false, true], 'THP always: already on huge pages, no relaunch');
  t.same(always.reads, ['thp'], 'and glibc is not asked');

  const userSet = decideHugePages(facts({ tunables: 'glibc.malloc.hugetlb=0', setting: '1' }));
  t.same([userSet.relaunch, userSet.inForce], [false, false], 'a tunable the user set is respected, never overridden');
  const userOn = decideHugePages(facts({ tunables: 'glibc.malloc.hugetlb=1' }));
  t.same([userOn.relaunch, userOn.inForce], [false, true], 'the tunable already set: in force, no relaunch (no loop)');
});

t.test('what is in force', async (t) => {
  t.equal(inForce(facts({ tunables: 'glibc.malloc.hugetlb=1' })).inForce, true);
  t.match(inForce(facts({ tunables: 'glibc.malloc.hugetlb=1', thp: 'never' })).reason, /is set, but transparent huge pages are `never`/);
  t.match(inForce(facts({ tunables: 'glibc.malloc.hugetlb=1', glibc: null })).reason, /is set, but the C library is not glibc/);
  t.match(inForce(facts({ setting: '1' })).reason, /reached no launcher/, 'CUTOUT_HUGEPAGES=1 without the launcher (the library) says so');
  t.equal(inForce(facts({ platform: 'darwin', tunables: 'glibc.malloc.hugetlb=1' })).inForce, false);
});

t.test('the parsers', async (t) => {
  t.equal(hugetlbTunable('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1'), '1');
  t.equal(hugetlbTunable('glibc.malloc.hugetlbx=1'), null);
  t.equal(hugetlbTunable(undefined), null);
  t.same(['1', 'ON', 'yes', 'true', '0', 'off', 'No', 'false', '', 'maybe', undefined].map(parseSetting), [true, true, true, true, false, false, false, false, null, null, null]);
  t.same(['always [madvise] never', '[always] madvise never', 'always madvise [never]', 'nonsense'].map(parseThpMode), ['madvise', 'always', 'never', null]);
  t.same(['2.35', '2.36', '3.0', '2.34', '2.9', 'x'].map(glibcHasTunable), [true, true, true, false, false, false]);
});

/** The same machine's facts, as a child started with this environment would see them. */
const expected = (setting: string | undefined) => inForce({ ...processFacts({}), setting, tunables: setting === '1' ? decideHugePages({ ...processFacts({}), setting }).tunables : undefined });

t.test('the CLI says what is in force: CUTOUT_HUGEPAGES=0, the default and =1', async (t) => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-huge-'));
  t.teardown(() => fs.rmSync(home, { recursive: true, force: true }));
  for (const setting of ['0', undefined, '1']) {
    const env = { CUTOUT_HOME: home, GLIBC_TUNABLES: '', CUTOUT_HUGEPAGES: setting ?? '' };
    const version = await runCli(['--version'], { env });
    t.same([version.code, version.stdout.toString().trim().length > 0], [0, true], `CUTOUT_HUGEPAGES=${setting ?? '(unset)'}: --version runs`);
    const list = await runCli(['models', 'list', '--json'], { env });
    t.equal(list.code, 0, list.stderr);
    const row = JSON.parse(list.stdout.toString().split('\n')[0]) as { huge_pages: { in_force: boolean; reason: string } };
    const want = expected(setting);
    t.same(row.huge_pages, { in_force: want.inForce, reason: want.reason }, `CUTOUT_HUGEPAGES=${setting ?? '(unset)'}: ${row.huge_pages.reason}`);
    if (setting === '0') t.equal(row.huge_pages.in_force, false, 'the opt-out is off');
  }
  // A real image through the relaunched process (where the system allows it), and an input
  // error's exit code passed on by the launcher.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-huge-img-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const photo = path.join(dir, 'p.jpg');
  await sharp(path.join(FIXTURES, 'chelsea.jpg')).resize(160).toFile(photo);
  const env = { CUTOUT_HOME: home, GLIBC_TUNABLES: '', CUTOUT_HUGEPAGES: '1' };
  const cut = await runCli([photo, '--quality', 'fast', '--json'], { env });
  t.equal(cut.code, 0, cut.stderr);
  t.equal((await sharp(path.join(dir, 'p.cutout.png')).metadata()).channels, 4, 'the cutout was written');
  const missing = await runCli([path.join(dir, 'missing.jpg')], { env });
  t.equal(missing.code, 1, 'a failed input exits 1 through the launcher');
  const usage = await runCli(['--no-such-flag'], { env });
  t.equal(usage.code, 2, 'a usage error exits 2 through the launcher');
});

t.test('serve with CUTOUT_HUGEPAGES=1 says so, and stops on a SIGTERM sent to the launcher', async (t) => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-huge-serve-'));
  t.teardown(() => fs.rmSync(home, { recursive: true, force: true }));
  const srv = await startListening(t, ['serve', '--port', '0', '--data', home], { env: { ...process.env, GLIBC_TUNABLES: '', CUTOUT_HUGEPAGES: '1' } });
  const want = expected('1');
  if (want.inForce) t.match(srv.stderr(), /the model's memory on huge pages \(glibc\.malloc\.hugetlb=1 in GLIBC_TUNABLES\)/, 'serve says huge pages are on');
  else t.notMatch(srv.stderr(), /huge pages/, `not on here (${want.reason}): no line`);
  const end = await srv.stop('SIGTERM');
  t.same([end.code, end.signal], [0, null], 'SIGTERM reached the real server, which stopped cleanly');
});

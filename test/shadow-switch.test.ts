/**
 * `--shadow` took a mode in issue 54 (none, drop, float, cast); before, it was a switch, and
 * `cutout --shadow photo.jpg` cut out photo.jpg. shadowAsSwitch keeps that command line working:
 * a word after `--shadow` that looks like an input stays an input (the bare flag is float), while
 * a mode, or a mistyped one, stays the flag's value.
 */
import t from 'tap';
import { shadowAsSwitch } from '../src/commands/image-flags.js';

const none = () => false;

t.test('an input after --shadow stays an input', async (t) => {
  t.same(shadowAsSwitch(['node', 'cutout', '--shadow', 'photo.jpg'], none), ['node', 'cutout', '--shadow=float', 'photo.jpg']);
  t.same(shadowAsSwitch(['node', 'cutout', '--shadow', 'photos/'], none), ['node', 'cutout', '--shadow=float', 'photos/']);
  t.same(shadowAsSwitch(['node', 'cutout', '--shadow', '*.png'], none), ['node', 'cutout', '--shadow=float', '*.png']);
  t.same(shadowAsSwitch(['node', 'cutout', '--shadow', '-'], none), ['node', 'cutout', '--shadow=float', '-']);
  t.same(shadowAsSwitch(['node', 'cutout', '--shadow', 'inbox'], (p) => p === 'inbox'), ['node', 'cutout', '--shadow=float', 'inbox'], 'a folder that is there');
});

t.test('a mode, a mistyped mode, a flag or the end of options are left alone', async (t) => {
  for (const argv of [
    ['cutout', 'a.jpg', '--shadow', 'cast'],
    ['cutout', 'a.jpg', '--shadow', 'FLOAT'],
    ['cutout', 'a.jpg', '--shadow', 'true'],
    ['cutout', 'a.jpg', '--shadow', 'soft'],
    ['cutout', 'a.jpg', '--shadow', '--json'],
    ['cutout', 'a.jpg', '--shadow'],
    ['cutout', '--', '--shadow', 'b.jpg'],
  ]) t.same(shadowAsSwitch(argv, none), argv, argv.join(' '));
});

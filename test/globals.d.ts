/**
 * `Tap.Test`, the type of a tap test's `t`, as the tests name it in helper signatures (tap 21
 * exports the class as `Test`; this is the same type under the older global name).
 */
declare namespace Tap {
  type Test = import('tap').Test;
}

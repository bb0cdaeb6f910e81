/** Store URLs: which engine a URL selects, and the URL as it may be shown (no password). */

/** postgres:// or postgresql://: a PostgreSQL store. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * The URL without its password, for messages. One that does not parse as a URL with a host
 * (`postgres:/u:pw@h/db`, a typo) still has what follows the user name's `:` masked, up to the
 * last `@`: it may be a password. When in doubt, more is masked.
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.host !== '') {
      if (u.password) u.password = '***';
      return u.toString();
    }
  } catch {
    // not a URL: the fallback below
  }
  const at = url.lastIndexOf('@');
  if (at === -1) return url;
  const scheme = /^[a-z][a-z0-9+.-]*:\/*/i.exec(url)?.[0] ?? '';
  const userinfo = url.slice(scheme.length, at);
  const colon = userinfo.indexOf(':');
  // No `:` left: a user name, or a password the scheme's `:` was taken for (`u:pw@h`); masked too.
  return colon === -1 ? `${scheme}***${url.slice(at)}` : `${scheme}${userinfo.slice(0, colon)}:***${url.slice(at)}`;
}

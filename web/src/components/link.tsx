/** An <a> that navigates inside the app (plain clicks only: ctrl/⌘-click still opens a tab). */
import type { AnchorHTMLAttributes } from 'preact';
import { addressOf } from '../base';
import { navigate } from '../router';

export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  const { href, ...rest } = props;
  return (
    <a
      {...rest}
      href={addressOf(href)}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    />
  );
}

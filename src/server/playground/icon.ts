/** The playground's favicon: a cut-out circle over a checkerboard, as SVG. */
export const PLAYGROUND_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="6" fill="#e5e7eb"/>
<path d="M0 0h8v8H0zM16 0h8v8h-8zM8 8h8v8H8zM24 8h8v8h-8zM0 16h8v8H0zM16 16h8v8h-8zM8 24h8v8H8zM24 24h8v8h-8z" fill="#cbd5e1"/>
<circle cx="16" cy="13" r="6" fill="#4f46e5"/>
<path d="M5 30c1-7 6-10 11-10s10 3 11 10z" fill="#4f46e5"/>
</svg>
`;

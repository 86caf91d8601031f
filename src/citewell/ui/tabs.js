// Tabs as the WAI-ARIA tabs pattern has them: one Tab stop for the whole tab list (the selected
// tab), arrow keys, Home and End to move between tabs, and a tab shown as soon as it is focused.

export function tabs(tablist) {
  const all = [...tablist.querySelectorAll('[role="tab"]')];
  const select = (chosen) => {
    for (const tab of all) {
      const selected = tab === chosen;
      tab.setAttribute("aria-selected", String(selected));
      tab.tabIndex = selected ? 0 : -1;
      document.getElementById(tab.getAttribute("aria-controls")).hidden = !selected;
    }
    chosen.focus();
  };
  const moves = {
    ArrowRight: (at) => (at + 1) % all.length,
    ArrowLeft: (at) => (at - 1 + all.length) % all.length,
    Home: () => 0,
    End: () => all.length - 1,
  };
  tablist.addEventListener("keydown", (event) => {
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    select(all[move(all.indexOf(document.activeElement))]);
  });
  for (const tab of all) tab.addEventListener("click", () => select(tab));
}

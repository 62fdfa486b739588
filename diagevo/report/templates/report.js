(function () {
  const pick = document.getElementById('tree-round');
  if (pick) {
    const show = () => { for (const t of document.querySelectorAll('div.tree')) t.hidden = t.dataset.round !== pick.value; };
    pick.addEventListener('change', show);
    show();
  }
  const filter = document.getElementById('cause-filter');
  if (filter) {
    filter.addEventListener('input', () => {
      const q = filter.value.toLowerCase();
      for (const row of document.querySelectorAll('#causes tbody tr')) row.hidden = q !== '' && !row.textContent.toLowerCase().includes(q);
    });
  }
})();

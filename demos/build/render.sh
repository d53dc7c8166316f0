# render.sh PAGE.md OUT.html: a Markdown page to HTML, as far as this demo needs (headings and paragraphs).
mkdir -p "$(dirname "$2")"
sed -e 's:^# \(.*\):<h1>\1</h1>:' -e 's:^\([^<].*\):<p>\1</p>:' "$1" > "$2"
echo "rendered $1 -> $2 ($(wc -l < "$2") lines)"

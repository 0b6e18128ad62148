package chat

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// strftime formats t as Python's datetime.strftime does on Linux (glibc, C
// locale), which is what transformers' strftime_now calls on a naive
// datetime.now(): templates use it for "Today Date: 26 Jul 2024" and "Current
// date: 2024-07-26". glibc's flags '-' (no padding), '_' (spaces), '0' and '^'
// (upper case) are honoured; %z and %Z are empty, as for a naive datetime; an
// unknown directive is copied through, as glibc does.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		start := i
		i++
		flag := byte(0)
		if strings.IndexByte("-_0^#", format[i]) >= 0 && i+1 < len(format) {
			flag = format[i]
			i++
		}
		out, ok := strftimeDirective(t, format[i], flag)
		if !ok {
			b.WriteString(format[start : i+1])
			continue
		}
		b.WriteString(out)
	}
	return b.String()
}

func strftimeDirective(t time.Time, d, flag byte) (string, bool) {
	num := func(v, width int, pad byte) string {
		switch flag {
		case '-':
			return strconv.Itoa(v)
		case '_':
			pad = ' '
		case '0':
			pad = '0'
		}
		s := strconv.Itoa(v)
		for len(s) < width {
			s = string(pad) + s
		}
		return s
	}
	text := func(s string) string {
		if flag == '^' {
			return strings.ToUpper(s)
		}
		return s
	}
	hour12 := t.Hour() % 12
	if hour12 == 0 {
		hour12 = 12
	}
	isoYear, isoWeek := t.ISOWeek()
	switch d {
	case 'a':
		return text(t.Weekday().String()[:3]), true
	case 'A':
		return text(t.Weekday().String()), true
	case 'b', 'h':
		return text(t.Month().String()[:3]), true
	case 'B':
		return text(t.Month().String()), true
	case 'c':
		return text(strftime(t, "%a %b %e %H:%M:%S %Y")), true
	case 'C':
		return num(t.Year()/100, 2, '0'), true
	case 'd':
		return num(t.Day(), 2, '0'), true
	case 'D', 'x':
		return strftime(t, "%m/%d/%y"), true
	case 'e':
		return num(t.Day(), 2, ' '), true
	case 'f': // datetime's own directive: microseconds
		return fmt.Sprintf("%06d", t.Nanosecond()/1000), true
	case 'F':
		return strftime(t, "%Y-%m-%d"), true
	case 'G':
		return num(isoYear, 1, '0'), true
	case 'g':
		return num(isoYear%100, 2, '0'), true
	case 'H':
		return num(t.Hour(), 2, '0'), true
	case 'I':
		return num(hour12, 2, '0'), true
	case 'j':
		return num(t.YearDay(), 3, '0'), true
	case 'k':
		return num(t.Hour(), 2, ' '), true
	case 'l':
		return num(hour12, 2, ' '), true
	case 'm':
		return num(int(t.Month()), 2, '0'), true
	case 'M':
		return num(t.Minute(), 2, '0'), true
	case 'n':
		return "\n", true
	case 'p':
		if t.Hour() < 12 {
			return "AM", true
		}
		return "PM", true
	case 'P':
		if t.Hour() < 12 {
			return "am", true
		}
		return "pm", true
	case 'r':
		return strftime(t, "%I:%M:%S %p"), true
	case 'R':
		return strftime(t, "%H:%M"), true
	case 's':
		return strconv.FormatInt(t.Unix(), 10), true
	case 'S':
		return num(t.Second(), 2, '0'), true
	case 't':
		return "\t", true
	case 'T', 'X':
		return strftime(t, "%H:%M:%S"), true
	case 'u':
		wd := int(t.Weekday())
		if wd == 0 {
			wd = 7
		}
		return num(wd, 1, '0'), true
	case 'U':
		return num((t.YearDay()+6-int(t.Weekday()))/7, 2, '0'), true
	case 'V':
		return num(isoWeek, 2, '0'), true
	case 'w':
		return num(int(t.Weekday()), 1, '0'), true
	case 'W':
		return num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2, '0'), true
	case 'y':
		return num(t.Year()%100, 2, '0'), true
	case 'Y':
		return num(t.Year(), 1, '0'), true
	case 'z', 'Z':
		return "", true
	case '%':
		return "%", true
	}
	return "", false
}

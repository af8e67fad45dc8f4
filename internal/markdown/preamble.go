package markdown

import (
	"strings"

	"github.com/outprint/outprint/internal/highlight"
	"github.com/outprint/outprint/internal/script"
)

// Profile is what the preamble depends on: nothing of one document but
// its paper and the fallback font groups its text needs. A warm TeX
// process loads the preamble of a profile before the document arrives.
type Profile struct {
	Paper   string // "a4" (default) or "letter"
	Scripts script.Set
	// RTL loads the bidi package, which sets paragraphs right to left
	// (direction.go): for a document whose language is right to left
	// (Document.NeedsBidi). Scripts with right-to-left letters load it
	// anyway.
	RTL bool
}

// Preamble returns everything before \begin{document} for a profile. It is
// lean on purpose: every package costs warm-up time. The writer's own
// macros all start with \op.
func Preamble(p Profile) string {
	paper := "a4paper"
	if p.Paper == "letter" {
		paper = "letterpaper"
	}
	var b strings.Builder
	b.WriteString(`\documentclass[11pt]{article}
\usepackage[` + paper + `,top=2.2cm,bottom=2.6cm,left=2.4cm,right=2.4cm,footskip=1.1cm]{geometry}
\usepackage{fontspec}
\usepackage{xcolor}
\usepackage{graphicx}
\usepackage{longtable,array,booktabs}
\usepackage{fvextra}
\usepackage{enumitem}
\usepackage{fancyhdr}
\usepackage{amsmath}
\usepackage[warnings-off={mathtools-colon,mathtools-overbracket}]{unicode-math}
\usepackage{framed}
\usepackage[normalem]{ulem}
\usepackage[unicode,colorlinks,linkcolor=oplink,urlcolor=oplink,citecolor=oplink,bookmarksnumbered,hyperfootnotes=false,pdfcreator={outprint}]{hyperref}
\usepackage{bookmark}
`)
	rtl := p.RTL || p.Scripts&(script.Arabic|script.Hebrew) != 0
	if rtl {
		// Last: it adapts the packages above (framed, longtable,
		// fancyhdr, hyperref) to right-to-left paragraphs.
		b.WriteString("\\usepackage{bidi}\n")
	}
	// Everything above is packages, which a warm TeX pool dumps into a
	// format once (XeTeX can dump packages but not loaded fonts); the
	// marker ends that part, and fonts and macros follow it.
	b.WriteString(`\csname endofdump\endcsname
\setmainfont{Noto Serif}
\setsansfont{Noto Sans}
\setmonofont{Noto Sans Mono}[Scale=MatchLowercase]
\setmathfont{TeX Gyre Schola Math}[Scale=MatchLowercase]
`)
	b.WriteString(script.FontPreamble(p.Scripts))
	b.WriteString(highlight.Preamble)
	b.WriteString("\n")
	b.WriteString(writerMacros)
	if rtl {
		b.WriteString(directionMacros)
	} else {
		b.WriteString(noDirectionMacros)
	}
	return b.String()
}

// writerMacros are the definitions the body relies on. Every name the
// writer emits is listed in vocabulary (fuzz_test.go checks the body
// against it).
const writerMacros = `\definecolor{oplink}{HTML}{1F4E9A}
\definecolor{opinfofg}{HTML}{1F6FB2}\definecolor{opinfobg}{HTML}{EAF3FB}
\definecolor{opwarningfg}{HTML}{B25B00}\definecolor{opwarningbg}{HTML}{FFF4E5}
\definecolor{optipfg}{HTML}{6A3FB5}\definecolor{optipbg}{HTML}{F3EEFB}
\definecolor{opsuccessfg}{HTML}{2E7D32}\definecolor{opsuccessbg}{HTML}{EAF6EA}
\definecolor{ophighlight}{HTML}{FFF176}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.55em plus 0.2em minus 0.1em}
\setlength{\emergencystretch}{3em}
\setlength{\LTpre}{1em}\setlength{\LTpost}{0.8em}
% Footnotes keep their distance from a notice box above them; within
% them, no blank line between notes, and every paragraph of a note aligned
% with its first (the mark hangs in the indentation).
\setlength{\skip\footins}{1.4em plus 0.4em minus 0.2em}
\makeatletter
% A note's text ends with \par: LaTeX's final strut would then start an
% empty paragraph, a blank line before the next note; after \par it only
% makes the last line as deep as a strut.
\long\def\@makefntext#1{\parindent\z@\parskip0.2em\relax\leftskip1.5em\def\@finalstrut##1{\ifhmode\unskip\nobreak\vrule\@width\z@\@height\z@\@depth\dp##1\else\ifdim\prevdepth<\dp##1\kern\dimexpr\dp##1-\prevdepth\relax\fi\fi}\noindent\llap{\hb@xt@1.5em{\@makefnmark\hss}}#1}
\makeatother
\frenchspacing
% Hyphenation in the document's language: the patterns of the languages
% TeX Live installs are in the format (language.dat); a language whose
% patterns are missing gets English's.
\newcommand\oplanguage[1]{\ifcsname l@#1\endcsname\language=\csname l@#1\endcsname\else\language=\l@english\fi\relax}
\hbadness=10000
\urlstyle{same}
\makeatletter
% Headings: sans serif, \paragraph and \subparagraph on a line of their own.
\renewcommand\section{\@startsection{section}{1}{\z@}{-3ex \@plus -1ex \@minus -.2ex}{1.2ex \@plus .2ex}{\normalfont\sffamily\Large\bfseries}}
\renewcommand\subsection{\@startsection{subsection}{2}{\z@}{-2.8ex\@plus -1ex \@minus -.2ex}{0.8ex \@plus .2ex}{\normalfont\sffamily\large\bfseries}}
\renewcommand\subsubsection{\@startsection{subsubsection}{3}{\z@}{-2.5ex\@plus -1ex \@minus -.2ex}{0.6ex \@plus .2ex}{\normalfont\sffamily\normalsize\bfseries}}
\renewcommand\paragraph{\@startsection{paragraph}{4}{\z@}{-2ex\@plus -1ex \@minus -.2ex}{0.4ex \@plus .2ex}{\normalfont\sffamily\normalsize\bfseries\itshape}}
\renewcommand\subparagraph{\@startsection{subparagraph}{5}{\z@}{-2ex\@plus -1ex \@minus -.2ex}{0.4ex \@plus .2ex}{\normalfont\sffamily\normalsize\itshape}}
% \opneed{n}: a new page unless n lines fit on this one (keep.go).
\newcommand\opneed[1]{\par\penalty-100\begingroup\dimen@=#1\baselineskip\relax\dimen@ii=\pagegoal\advance\dimen@ii-\pagetotal
  \ifdim\pagegoal<\maxdimen\ifdim\dimen@>\dimen@ii\ifdim\dimen@ii>\z@\vfil\penalty-\@M\fi\fi\fi\endgroup}
% Footer "Page N of M" in one run: the total is a form XObject that
% \AtEndDocument defines once the last page number is known; xdvipdfmx
% resolves the forward reference. The total is set in the footer's font.
% \OutprintTotal (outprint's TeX harness) says it in the log, so that a PDF
% with more pages than its footers announce is refused.
\AtEndDocument{\ifdefined\OutprintTotal\OutprintTotal{\the\value{page}}\fi\par\setbox\@tempboxa\hbox{\normalfont\small\sffamily\the\value{page}}\nointerlineskip\vbox to 0pt{\hbox to 0pt{\special{pdf:bxobj @optotal width \the\wd\@tempboxa\space height \the\ht\@tempboxa\space depth \the\dp\@tempboxa}\box\@tempboxa\special{pdf:exobj}\hss}\vss}}
\makeatother
% The footer says "Page N of M" in the middle; a right-to-left document
% (\opdocrtl) keeps the phrase left to right.
\newcommand\oppageof{\small\sffamily Page \thepage\ of \special{pdf:uxobj @optotal}}
\newcommand\opfootc{\oppageof}
\fancypagestyle{opfooter}{\fancyhf{}\renewcommand{\headrulewidth}{0pt}\renewcommand{\footrulewidth}{0pt}\fancyfoot[C]{\opfootc}}
\fancypagestyle{plain}{\fancyhf{}\renewcommand{\headrulewidth}{0pt}\renewcommand{\footrulewidth}{0pt}\fancyfoot[C]{\opfootc}}
\pagestyle{opfooter}
% Lists nest nine deep (the writer flattens deeper levels).
\setlistdepth{9}
\renewlist{itemize}{itemize}{9}
\renewlist{enumerate}{enumerate}{9}
% Code blocks: a light rule on their left, so that blocks in a row stay apart.
\fvset{frame=leftline,framerule=1.5pt,rulecolor=\color{black!18},framesep=0.7em,xleftmargin=0.2em}
\setlist{topsep=0.3em,partopsep=0pt,itemsep=0.2em,parsep=0.3em}
\setlist[itemize]{label=\textbullet}
\setlist[itemize,2,4,6,8]{label=\textendash}
\setlist[enumerate]{label=\arabic*.}
\newenvironment{opquote}{\begin{list}{}{\leftmargin=1.2em\rightmargin=0pt\topsep=0.3em}\item\relax\color{black!75}}{\end{list}}
\newcommand\optoggletitle[1]{\par\addvspace{0.6em}\noindent{\sffamily\bfseries #1}\par\nobreak}
\newenvironment{optoggle}[1]{\optoggletitle{#1}\begin{list}{}{\leftmargin=1.2em\rightmargin=0pt\topsep=0.2em}\item\relax}{\end{list}}
% \opheadbreak goes between two headings (writer.headingAfterHeading): a
% discouraged but legal page break, since LaTeX keeps a heading with what
% follows and a run of headings taller than a page overflowed it (what did
% not fit was lost below its bottom edge). \opitemhead goes before a
% heading that opens a list item or quote (writer.containerStart): after
% another heading, \@startsection would clear the \item's \everypar, so
% its label was never set ("missing \item"). A notice frame that opens an
% item sets its content in a box, where the label cannot go, so the label
% gets a line of its own that the frame then moves up to (\opframefirst).
\makeatletter
\newcommand\opitemhead{\@nobreakfalse}
\makeatother
\newcommand\opheadbreak{\penalty5000\relax}
\newcommand\opframefirst{\leavevmode\par\vspace{-\baselineskip}}
\newcommand\opflatitem[1]{\par\noindent\hangindent=\opifrtl{-}{}1.5em\hangafter=1\makebox[1.5em][l]{#1}}
% Notices: a coloured bar and background, a label; framed breaks across pages.
\newcommand\opnoticelabel[2]{\par\noindent{\sffamily\bfseries\small\color{op#1fg}#2}\par\nobreak}
% The bar is on the right of a right-to-left notice (\opp@nbar, set at its
% start); the frame is built left to right, where the bidi package's
% colour commands add no direction of their own.
\makeatletter
\def\opp@nbar{l}
\newcommand\opnoticeframe[2]{\hbox{\opsetltr\if r\opp@nbar\fboxsep=7pt\colorbox{op#1bg}{#2}{\color{op#1fg}\vrule width 3pt}\else{\color{op#1fg}\vrule width 3pt}\fboxsep=7pt\colorbox{op#1bg}{#2}\fi}}
\makeatother
% Inside lists the frame keeps the list's indentation (as framed's own
% shaded environment does).
\makeatletter
\newenvironment{opnotice}[2]{\opifrtl{\def\opp@nbar{r}}{\def\opp@nbar{l}}\let\centerline\opp@centerline\def\FrameCommand##1{\hskip\@totalleftmargin\opnoticeframe{#1}{##1}\hskip-\linewidth\hskip-\@totalleftmargin\hskip\columnwidth}\MakeFramed{\advance\hsize-\width\@totalleftmargin\z@\linewidth\hsize\@setminipage}\opnoticelabel{#1}{#2}\vspace{-0.3em}}{\par\unskip\@minipagefalse\endMakeFramed}
\makeatother
% Text.
\newcommand\opbr{\penalty200\hskip0pt\relax}
\newcommand\opbrk{{\parskip=0pt\endgraf\noindent}}
\DeclareRobustCommand\opnl{\ifhmode\unskip\newline\fi}
% A word whose glyphs do not map back to its text (texwriter.escRun):
% a marked-content span with the text as /ActualText (#1, UTF-16BE hex).
% An emoji image: at the height of the text's em, its foot a little below
% the baseline like a glyph's descender, its text (#1) in /ActualText.
% Readers give an ActualText only for the glyphs drawn inside its span, so
% an invisible em dash (text render mode 3), about the emoji's width, lies
% under the image.
\DeclareRobustCommand\opemoji[2]{\opactual{#1}{\rlap{\raisebox{-0.12em}{\includegraphics[height=0.95em]{#2}}}\special{pdf:literal direct 3 Tr}\makebox[0.95em][l]{\rmfamily\mdseries\upshape\symbol{"2014}}\special{pdf:literal direct 0 Tr}}}
\DeclareRobustCommand\opactual[2]{\leavevmode\hbox{\special{pdf:literal direct /Span<</ActualText<#1>>>BDC}#2\special{pdf:literal direct EMC}}}
% Inline code and URLs keep their monospace spacing: a space is the
% font's own, never stretched by justification; and they are never
% hyphenated (a hyphen in a URL would read as part of it).
\newcommand\opmono{\ttfamily\hyphenchar\font=-1\spaceskip=\fontdimen2\font\xspaceskip=\fontdimen2\font}
\DeclareRobustCommand\optt[1]{{\opmono #1}}
% Inline HTML (html.go): <kbd> and <mark>.
\DeclareRobustCommand\opkbd[1]{{\opmono #1}}
\DeclareRobustCommand\ophlbox[1]{{\fboxsep=1pt\colorbox{ophighlight}{#1}}}
\DeclareRobustCommand\opurl[1]{{\opmono #1}}
\DeclareRobustCommand\opul[1]{\uline{#1}}
\DeclareRobustCommand\opst[1]{\sout{#1}}
% The highlight's box is smashed: it must not change the line's height.
\DeclareRobustCommand\ophl[1]{\bgroup\markoverwith{\textcolor{ophighlight}{\smash{\rule[-0.3ex]{2pt}{2.5ex}}}}\ULon{#1}}
% An Outline placeholder (!!text!!) keeps a grey marking.
\DeclareRobustCommand\opph[1]{\bgroup\markoverwith{\textcolor{black!12}{\smash{\rule[-0.3ex]{2pt}{2.5ex}}}}\ULon{#1}}
\DeclareRobustCommand\opfnmark[1]{\textsuperscript{#1}}
\DeclareRobustCommand\opanchor[1]{\special{pdf:dest (#1) [@thispage /XYZ @xpos @ypos null]}}
\newcommand\opminorheading[1]{\par\noindent{\sffamily\bfseries #1}\par}
\newcommand\opcodelines[1]{\par{\raggedright\small #1\par}}
\newcommand\opnewpage{\par\newpage}
\newcommand\oprule{\par\noindent{\color{black!40}\rule{\linewidth}{0.4pt}}\par}
\newcommand\opmissing[1]{\opifrtl{]#1[}{[#1]}}
% Images: never floating, never split, scaled to the line and 3/4 page. In
% running text a line may end before an image, filled, so that a large
% image goes to the next line instead of over the margin.
\newlength\opimgw\newlength\opimgh
\newcommand\opimg[4]{\ifhmode\hfil\penalty0\hskip0pt plus -1fil\relax\fi\setlength\opimgw{#2}\ifdim\opimgw>#1\relax\setlength\opimgw{#1}\fi\setlength\opimgh{#3}\ifdim\opimgh>0.75\textheight\setlength\opimgh{0.75\textheight}\fi\includegraphics[width=\opimgw,height=\opimgh,keepaspectratio]{#4}}
% \opimgpage{page}{...}: \opimg of one page of a PDF (a document's diagrams
% share one PDF, a page each).
\newcommand\opimgpage[5]{\ifhmode\hfil\penalty0\hskip0pt plus -1fil\relax\fi\setlength\opimgw{#3}\ifdim\opimgw>#2\relax\setlength\opimgw{#2}\fi\setlength\opimgh{#4}\ifdim\opimgh>0.75\textheight\setlength\opimgh{0.75\textheight}\fi\includegraphics[page=#1,width=\opimgw,height=\opimgh,keepaspectratio]{#5}}
\newenvironment{opfigure}[1]{\par\noindent\begin{minipage}{\linewidth}\csname opalign#1\endcsname}{\end{minipage}\par\addvspace{0.4em}}
\newcommand\opalignc{\centering}\newcommand\opalignl{\raggedright}\newcommand\opalignr{\raggedleft}
\newcommand\opcaption[1]{\par\vspace{0.2em}{\small\itshape #1\par}}
% A half-width image (Outline's right-50, left-50) before a paragraph: the
% paragraph's first lines run beside it. \opwrapfig{r|l}{image}{caption}
% sets the image and its caption in a box as wide as the image and counts
% the lines it spans (rounded up, with at least two thirds of a line to spare), and
% starts a new page unless they fit on this one; \opwrapstart, first thing in the next paragraph,
% narrows those lines (\hangindent), puts the box beside them and keeps
% them on one page (\clubpenalties); \opwrapend, after it, adds the room
% a paragraph shorter than the image leaves. No float: the image stays
% where the document has it.
\makeatletter
\newbox\opwrapbox\newcount\opwraplines\newlength\opwrapgap\setlength\opwrapgap{1.2em}
\newcommand\opwrapfig[3]{\par\setbox0\hbox{#2}\setbox\opwrapbox\vbox{\hsize=\ifdim\wd0<0.25\linewidth 0.25\linewidth\else\wd0\fi\parskip=0pt\csname opalign#1\endcsname\noindent\box0\par#3}\opwraplines=\numexpr(\ht\opwrapbox+\dp\opwrapbox+\baselineskip*6/5)/\baselineskip\relax\def\opwrapside{#1}\opneed{\the\numexpr\opwraplines+1\relax}}
\newcommand\opwrapstart{\hangafter=-\opwraplines\relax\hangindent=\ifx\opwrapside\opwrapsider-\fi\dimexpr\wd\opwrapbox+\opwrapgap\relax\def\op@cp{}\count@=\z@\loop\ifnum\count@<\opwraplines\edef\op@cp{\op@cp 10000 }\advance\count@\@ne\repeat\clubpenalties=\numexpr\opwraplines+1\relax\op@cp\clubpenalty\leavevmode\ifx\opwrapside\opwrapsider\rlap{\hskip\dimexpr\linewidth-\wd\opwrapbox\relax\smash{\lower\dimexpr\ht\opwrapbox-\ht\strutbox\relax\box\opwrapbox}}\else\llap{\smash{\lower\dimexpr\ht\opwrapbox-\ht\strutbox\relax\box\opwrapbox}\hskip\opwrapgap}\fi\ignorespaces}
\def\opwrapsider{r}
\newcommand\opwrapend{\clubpenalties=\z@\ifnum\prevgraf<\opwraplines\vspace{\dimexpr\baselineskip*\numexpr\opwraplines-\prevgraf\relax\relax}\fi\opwraplines=\z@}
\makeatother
\newcommand\opmathgap{\par\vspace{0.4\baselineskip}}
% Tables: \optw is the line width less the column separation (#1 times
% \tabcolsep); #2 is the size: 0 normal, 1 small, 2 footnotesize, where
% the many columns also stand closer.
\newlength\optw
\newenvironment{optable}[2]{\par\ifcase#2\or\small\setlength\tabcolsep{4pt}\or\footnotesize\setlength\tabcolsep{3pt}\fi
  \setlength\optw{\dimexpr\linewidth-#1\tabcolsep\relax}}{\par}
\newcommand\opcelll{\raggedright\arraybackslash}
\newcommand\opcellr{\raggedleft\arraybackslash}
\newcommand\opcellc{\centering\arraybackslash}
% A cell's paragraph begins with \opcs; a cell whose direction is not
% the table's with \opcsl or \opcsr: longtable has begun the paragraph
% (its strut) in the table's direction, so it is ended, its line taken
% away, and begun again in the cell's. They are \protected: TeX expands
% the first tokens of a cell, looking for \omit, before the column's
% template has begun the paragraph.
\makeatletter
\newcommand\opcs{\hskip0pt\relax}
\protected\def\opcsl{\op@cellturn\opsetltr}
\protected\def\opcsr{\op@cellturn\opsetrtl}
\def\op@cellturn#1{\ifhmode\ifinner\else\@@par\setbox\z@\lastbox\nointerlineskip\fi\fi#1\noindent\vrule\@height\ht\@arstrutbox\@width\z@\hskip0pt\relax}
\makeatother
\newcommand\opthead[1]{{\bfseries #1}}
% Column widths (table.go): \opcolm{j}{…} keeps in \opc@m@j the widest
% piece of column j that must not wrap, \opcolp{j}{…} in \opc@p@j its
% widest short label (at most four words), \opcoln{j}{…} in \opc@n@j its
% widest cell; \opcolwidths{n}{r} sets \opcw{j}. If the natural widths fit,
% they are the widths. Else each column gets a base width, its label width
% if all label widths fit and leave r of the line to the columns that wrap
% (table.go's proseReserve where prose makes most rows tall, else 0pt),
% its unbroken width if not, and what is left of the line goes to the
% columns that wrap, in proportion to the square of
% their excess (natural less base width, in points, capped): a prose
% column gets most of it, a column of short phrases wraps where the prose
% makes the row tall anyway; a column whose share would pass its natural
% width gets that and leaves the rest to the others. If not even the
% unbroken widths fit, they are scaled to the line. Measuring happens in a
% box: a line break there is nothing.
\makeatletter
\newdimen\opc@summ\newdimen\opc@sump\newdimen\opc@sumn\newdimen\opc@sumb\newdimen\opc@left\newcount\opc@sq\newcount\opc@j\newif\ifopc@changed
\def\opc@m#1{\csname opc@m@#1\endcsname}
\def\opc@n#1{\csname opc@n@#1\endcsname}
\def\opc@p#1{\csname opc@p@#1\endcsname}
\def\opc@b#1{\csname opc@\opc@base @#1\endcsname}
\def\opc@e#1{\csname opc@e@#1\endcsname}
\newcommand\opcw[1]{\csname opc@w@#1\endcsname}
\newcommand\opcolinit[1]{\opc@j=\z@\loop\ifnum\opc@j<#1\relax\advance\opc@j\@ne
  \expandafter\def\csname opc@m@\the\opc@j\endcsname{0pt}\expandafter\def\csname opc@p@\the\opc@j\endcsname{0pt}\expandafter\def\csname opc@n@\the\opc@j\endcsname{0pt}\repeat}
\def\opc@measure#1#2#3{\begingroup\let\opnl\relax\settowidth\@tempdima{#3}\expandafter\endgroup
  \expandafter\opc@keep\expandafter{\the\@tempdima}{#1}{#2}}
\def\opc@keep#1#2#3{\ifdim#1>\csname opc@#2@#3\endcsname\relax\expandafter\def\csname opc@#2@#3\endcsname{#1}\fi}
\newcommand\opcolm[2]{\opc@measure{m}{#1}{#2}}
\newcommand\opcolp[2]{\opc@measure{p}{#1}{#2}}
\newcommand\opcoln[2]{\opc@measure{n}{#1}{#2}}
\def\opc@setw#1#2{\expandafter\edef\csname opc@w@#1\endcsname{\the\dimexpr#2\relax}}
\def\opc@forall#1#2{\opc@j=\z@\loop\ifnum\opc@j<#1\relax\advance\opc@j\@ne#2\repeat}
\def\opc@J{\the\opc@j}
% \opc@raise{a}{b}: column j's a is at least its b.
\def\opc@raise#1#2{\ifdim\csname opc@#1@\opc@J\endcsname<\csname opc@#2@\opc@J\endcsname\relax
  \expandafter\edef\csname opc@#1@\opc@J\endcsname{\csname opc@#2@\opc@J\endcsname}\fi}
\newcommand\opcolwidths[2]{\opc@summ=\z@\opc@sump=\z@\opc@sumn=\z@
  \opc@forall{#1}{%
    \opc@raise{p}{m}\opc@raise{n}{p}%
    \opc@setw\opc@J{\opc@n\opc@J}%
    \advance\opc@summ\opc@m\opc@J\relax\advance\opc@sump\opc@p\opc@J\relax\advance\opc@sumn\opc@n\opc@J\relax}%
  \ifdim\opc@sumn>\optw
    \ifdim\opc@sump>\dimexpr\optw-(#2)\relax\def\opc@base{m}\opc@sumb=\opc@summ\else\def\opc@base{p}\opc@sumb=\opc@sump\fi
    \opc@share{#1}%
  \fi}
% The sharing of what the base widths leave of the line.
\def\opc@share#1{%
  \opc@forall{#1}{%
    \@tempcnta=\numexpr\dimexpr\opc@n\opc@J-\opc@b\opc@J\relax/65536\relax
    \ifnum\@tempcnta>2000 \@tempcnta=2000 \fi
    \expandafter\edef\csname opc@e@\opc@J\endcsname{\the\numexpr\@tempcnta*\@tempcnta\relax}}%
  \opc@left=\dimexpr\optw-\opc@sumb\relax
  \ifdim\opc@left>\z@
    \opc@fill{#1}%
    \opc@forall{#1}{\ifnum\opc@e\opc@J>\z@\opc@setw\opc@J{\opc@b\opc@J+\opc@left*\opc@e\opc@J/\opc@sq}\fi}%
  \else
    \opc@forall{#1}{\opc@setw\opc@J{\opc@b\opc@J*\number\optw/\number\opc@sumb}}%
  \fi}
% One round of the sharing: columns whose share reaches their natural
% width take it and leave the sharing; again until none does.
\def\opc@fill#1{\opc@changedfalse\opc@sq=\z@
  \opc@forall{#1}{\advance\opc@sq\opc@e\opc@J\relax}%
  \ifnum\opc@sq>\z@
    \opc@forall{#1}{\ifnum\opc@e\opc@J>\z@
      \ifdim\dimexpr\opc@left*\opc@e\opc@J/\opc@sq\relax<\dimexpr\opc@n\opc@J-\opc@b\opc@J\relax\else
        \advance\opc@left-\dimexpr\opc@n\opc@J-\opc@b\opc@J\relax
        \expandafter\def\csname opc@e@\opc@J\endcsname{0}\opc@changedtrue
      \fi\fi}%
  \fi
  \ifopc@changed\opc@fill{#1}\fi}
\makeatother
\newcommand\opcolgap{\addlinespace[0.45em]}
% Title block and table of contents.
\newenvironment{optitleblock}{\par\begingroup\centering}{\par\endgroup\vspace{1.2em}}
\newcommand\optitle[1]{{\sffamily\bfseries\LARGE #1\par}\vspace{0.5em}}
\newcommand\opsubtitle[1]{{\sffamily\large #1\par}\vspace{0.4em}}
\newcommand\opbyline[1]{{\small #1\par}\vspace{0.2em}}
% Table of contents in one run (writer.tocBlock): the writer lists the
% entries; each page number is a form XObject @opp<key>, placed in the
% entry now and defined when the page holding the heading ships out. The
% heading puts its key in a mark of class optoc (and remembers the page it
% was typeset on); the shipout hook defines every listed key up to the
% page's last mark: with this page's number from its first mark on, with
% the remembered page below it (a heading whose mark a box kept from the
% page, inside a framed notice), and at the last page every key left.
\makeatletter
\newenvironment{optoc}{\par\begingroup\parskip=0pt\section*{\contentsname}}{\endgroup\par\bigskip}
\NewMarkClass{optoc}
\newcount\opp@next \opp@next=\@ne
\newcount\opp@max
\newcount\opp@first
\newcount\opp@last
\newcount\opp@lastmark
\newif\ifopp@end
\def\opp@section{section}
\newcommand\opcontentsline[4]{\expandafter\global\expandafter\let\csname opp@used@#3\endcsname\@empty
  \ifnum#3>\opp@max\global\opp@max=#3\relax\fi
  \def\opp@level{#1}\ifx\opp@level\opp@section
    \expandafter\global\expandafter\let\csname opp@font@#3\endcsname\bfseries
  \else\expandafter\global\expandafter\let\csname opp@font@#3\endcsname\relax\fi
  \contentsline{#1}{#2}{\hbox to\@pnumwidth{\special{pdf:uxobj @opp#3}\hss}}{#4}}
\newcommand\opmark[1]{\InsertMark{optoc}{#1}\expandafter\xdef\csname opp@page@#1\endcsname{\thepage}}
\def\opp@define#1#2{\ifcsname opp@used@#1\endcsname
  \setbox\@tempboxa\hbox to\@pnumwidth{\hss\normalfont\normalsize\csname opp@font@#1\endcsname #2}%
  \hbox to\z@{\special{pdf:bxobj @opp#1 width \the\wd\@tempboxa\space height \the\ht\@tempboxa\space depth \the\dp\@tempboxa}\box\@tempboxa\special{pdf:exobj}\hss}\fi}
\def\opp@remembered#1{\ifcsname opp@page@#1\endcsname\csname opp@page@#1\endcsname\else ?\fi}
\def\opp@ship{\IfMarksEqualTF{optoc}{top}{first}{\opp@first=\maxdimen\opp@lastmark=\z@}%
    {\opp@first=\FirstMark{optoc}\relax\opp@lastmark=\LastMark{optoc}\relax}%
  \opp@last=\ifopp@end\opp@max\else\opp@lastmark\fi
  \loop\ifnum\opp@next>\opp@last\else
    \ifnum\opp@next<\opp@first\opp@define{\the\opp@next}{\opp@remembered{\the\opp@next}}%
    \else\ifnum\opp@next>\opp@lastmark\opp@define{\the\opp@next}{\opp@remembered{\the\opp@next}}%
    \else\opp@define{\the\opp@next}{\thepage}\fi\fi
    \global\advance\opp@next\@ne
  \repeat}
\AddToHook{shipout/foreground}{\put(0,0){\opp@ship}}
\AtEndDocument{\global\opp@endtrue}
% A heading inside a notice sets its mark inside framed's box, where the
% page builder does not see it: framed places each piece of the box with
% \centerline{\FrameCommand{\box<piece>}}, so inside notices \centerline
% reads the piece's first and last marks from a copy and sets them again
% after the piece, on the page's own list.
\def\opp@reg{\csname c__mark_class_optoc_mark\endcsname}
\def\opp@centerline#1{\opp@parse#1\@@line{\hss#1\hss}\opp@put}
\def\opp@parse#1#2{\opp@parse@arg#2\relax}
% The bidi package's framed wraps the piece in \hboxL.
\def\opp@parse@arg#1#2\relax{\ifx#1\hboxL\expandafter\@firstoftwo\else\expandafter\@secondoftwo\fi{\opp@parse@box#2}{\opp@parse@box#1#2}}
\def\opp@parse@box\box#1{\begingroup\setbox\z@\vbox{\unvcopy#1}\vbadness\@M\vfuzz\maxdimen\splitmaxdepth\maxdimen
  \setbox\z@\vsplit\z@ to\maxdimen\xdef\opp@gfirst{\splitfirstmarks\opp@reg}\xdef\opp@gbot{\splitbotmarks\opp@reg}\endgroup}
\def\opp@put{\ifx\opp@gfirst\@empty\else\marks\opp@reg{\opp@gfirst}\marks\opp@reg{\opp@gbot}\fi}
\makeatother
`

// directionMacros switch paragraph direction (direction.go) with the bidi
// package, for profiles that load it (Profile.RTL).
const directionMacros = `\makeatletter
% The tables' right-to-left column order is the writer's (it writes the
% cells in that order): the bidi package's own (\if@RTLtab) sets the page
% so far in a reversed box when a longtable starts, and mirrors lines that
% are not paragraphs (code, frames), and their colours.
\newcommand\opsetrtl{\setRTL\@RTLtabfalse}
\newcommand\opsetltr{\setLTR}
\newcommand\opifrtl[2]{\if@RTL#1\else#2\fi}
% A right-to-left document: its contents, title block, tables and footer.
\newcommand\opdocrtl{\opsetrtl\@RTLmaintrue\renewcommand\opfootc{\beginL\oppageof\endL}}
\makeatother
`

// noDirectionMacros stand for directionMacros in profiles without the
// bidi package: everything is left to right there.
const noDirectionMacros = `\newcommand\opsetrtl{}
\newcommand\opsetltr{}
\newcommand\opifrtl[2]{#2}
\newcommand\opdocrtl{}
`

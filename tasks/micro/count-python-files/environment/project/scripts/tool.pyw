print('gui')
